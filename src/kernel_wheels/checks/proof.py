"""What ``kernel-wheels verify`` reports: for each wheel, or each kernel installed in a
Python, what was proved, in one of four words, counted apart:

- ``verified``: signed by a signer the policy accepts, every file of the build matching
  the signed digest, and every file kernel-wheels wrote derived again and equal: the whole
  wheel is what its publisher signed;
- ``unsigned``: it passes, but no signature covers it (anyone could have built it);
- ``not verified``: it passes, signed, but not all of it is proved (a wheel another
  kernel-wheels release made: its own files are not derived again);
- ``failed``: the verdict refuses it.

The words come from the one verdict (:func:`~.verdict.judge_wheel`); nothing here
judges a wheel again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .report import CheckReport, Status
from .verdict import judge_wheel

if TYPE_CHECKING:
    from ..provenance import Policy, Verification

#: The rules whose "not verified" leaves part of a signed wheel unproved.
_PROVENANCE_RULES = ("provenance", "contract", "digest")


class Proof(Enum):
    """The word ``verify`` says a wheel (or an installed kernel) with, and counts it by."""

    VERIFIED = "verified"
    UNSIGNED = "unsigned"
    NOT_VERIFIED = "not verified"
    FAILED = "failed"


@dataclass(frozen=True)
class ProofResult:
    """What ``verify`` reports of one wheel, or of one kernel installed in a Python."""

    #: The wheel's file name, or the installed distribution's name.
    target: str
    path: Path
    proof: Proof
    #: Why it failed (empty unless it did).
    failures: tuple[str, ...]
    #: What was not proved (a signed wheel's unproved part, an unsigned one's reason).
    unproved: tuple[str, ...]
    #: What verifies now (None when nothing could be verified).
    verification: Verification | None

    @property
    def passed(self) -> bool:
        return self.proof is not Proof.FAILED

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "path": str(self.path), "passed": self.passed,
                "proof": self.proof.value, "failures": list(self.failures),
                "unproved": list(self.unproved),
                "provenance": self.verification.to_dict() if self.verification else None}


def proof_of(target: str, path: Path, failures: Iterable[str], unproved: Iterable[str],
             verification: Verification | None) -> ProofResult:
    failed, missing = tuple(failures), tuple(unproved)
    if failed:
        proof = Proof.FAILED
    elif verification is not None and verification.signed:
        proof = Proof.NOT_VERIFIED if missing else Proof.VERIFIED
    elif verification is not None:
        proof = Proof.UNSIGNED
        missing = missing or (verification.one_line(),)
    else:
        proof = Proof.NOT_VERIFIED
    return ProofResult(target, path, proof, failed, missing, verification)


def report_proof(report: CheckReport, path: Path) -> ProofResult:
    """A wheel's proof, from its verdict."""
    return proof_of(report.wheel, path, (f"[{f.check}] {f.message}" for f in report.failures),
                    (f"[{f.check}] {f.message}" for f in report.findings
                     if f.status is Status.NOT_VERIFIED and f.check in _PROVENANCE_RULES),
                    report.verification)


def verify_wheels(paths: Iterable[Path], policy: Policy) -> list[ProofResult]:
    """``kernel-wheels verify WHEEL...``: each wheel's verdict under ``policy``, offline,
    said as what it proves."""
    return [report_proof(judge_wheel(wheel, policy=policy), wheel) for wheel in paths]


def count(results: Iterable[ProofResult]) -> dict[Proof, int]:
    counted = dict.fromkeys(Proof, 0)
    for result in results:
        counted[result.proof] += 1
    return counted
