"""Findings of the checks and the report of one wheel."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..provenance.record import Verification


class Status(Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_VERIFIED = "not verified"  # could not be checked here; never counted as passed
    INFO = "info"  # a note on something that holds (a claim spelled differently from the code)


@dataclass(frozen=True)
class Finding:
    check: str  # record, metadata, wheel, manylinux, elf, abi3, digest, sbom, macho, pe
    status: Status
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "message": self.message}


@dataclass(frozen=True)
class CheckReport:
    wheel: str
    findings: tuple[Finding, ...]
    #: The lowest manylinux tag the wheel's ELF binaries honestly meet, if it has any.
    honest_manylinux: str | None = None
    #: The CUDA device code of the wheel and of each binary that has some
    #: (``checks.gpu.WheelGpuCode.to_dict``); None: no binary has a fat binary.
    gpu_code: dict[str, Any] | None = None
    #: The wheel's provenance as verified now (None: not asked, or it did not verify).
    verification: Verification | None = None

    @property
    def passed(self) -> bool:
        return not any(f.status is Status.FAIL for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.FAIL]

    @property
    def not_verified(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.NOT_VERIFIED]

    def first_failure(self) -> str:
        failures = self.failures
        if not failures:
            return ""
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"[{failures[0].check}] {failures[0].message}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "wheel": self.wheel,
            "passed": self.passed,
            "honest_manylinux": self.honest_manylinux,
            "gpu_code": self.gpu_code,
            "provenance": self.verification.to_dict() if self.verification else None,
            "findings": [f.to_dict() for f in self.findings],
        }
