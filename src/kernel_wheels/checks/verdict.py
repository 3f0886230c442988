"""One verdict on a wheel, from its bytes, a policy and (optionally) where it would be
installed: :func:`judge_wheel`. ``check``, ``verify``, ``index``, ``install``, ``serve``
and ``mirror`` ask it, and nothing else, whether a wheel is what it claims.

Three steps: gather the facts (:mod:`.facts`: the wheel read once), dispatch each binary
to the reader for its format (:mod:`.binaries`), and judge:

- the archive: RECORD (:mod:`.facts`), METADATA and WHEEL against the file name
  (:mod:`.contents`), where each file would land (:mod:`.members`), the names it is
  known by (:mod:`.names`);
- the closed contract (:mod:`.contract`): the variant folder against its metadata.json
  digest (:mod:`.digests`), every other member derived again and compared;
- provenance (:mod:`.signature`): the Sigstore bundle, the signed digests, the policy;
- what the records claim: the SBOM (:mod:`.sbom`), the variant file (:mod:`.variants`),
  the GPU code (:mod:`.gpu`); the binaries' linkage, manylinux policy and limited API;
- with a :class:`Target`: whether it runs on the target's GPU and whether its package's
  name is one the target already imports from elsewhere.

Nothing here raises for a bad wheel: a :class:`CheckReport` says what holds.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import InvalidWheelFilename

from .binaries import check_binaries
from .contents import check_metadata_and_wheel, parse_filename
from .digests import check_digests
from .facts import UNREADABLE, WheelContents, read_wheel_contents, written_wheel_contents
from .gpu import check_gpu_code
from .members import check_members, kernel_package
from .names import check_names
from .report import CheckReport, Finding, Status
from .sbom import check_sbom
from .variants import check_variant_json

if TYPE_CHECKING:  # the provenance package is loaded only for a policy to verify under
    import tempfile

    from ..kernel.gpu_target import Gpu
    from ..provenance import Policy, Verification
    from ..wheel.writer import Member, WrittenWheel


@dataclass(frozen=True)
class Target:
    """Where a wheel would be installed, as far as the verdict needs it (``install``)."""

    #: The GPU its CUDA or ROCm code must run on (None: none visible, no --gpu-arch).
    gpu: Gpu | None = None
    #: Top-level import names the target already takes elsewhere, and who takes each
    #: (``"the standard library"``, ``"numpy 2.1.0, installed there"``, ``"torch, which
    #: imports it"``).
    taken: tuple[tuple[str, str], ...] = field(default=())


def judge_wheel(path: Path, *, filename: str | None = None, archive: zipfile.ZipFile | None = None,
                policy: Policy | None = None, target: Target | None = None) -> CheckReport:
    """The verdict on the wheel at ``path``: ``filename`` is the name it claims (defaults
    to the file's own); ``archive``, the wheel already open, if it is; ``policy``: what
    its provenance must prove (the default policy: signatures verified where present);
    ``target``: where it would be installed."""
    filename = filename or path.name
    if not path.is_file():
        what = "is a folder, not a wheel" if path.is_dir() else "does not exist"
        return CheckReport(filename, (Finding("wheel", Status.FAIL, f"{path} {what}"),))
    try:
        parse_filename(filename)
    except InvalidWheelFilename as exc:
        return CheckReport(filename, (Finding("wheel", Status.FAIL,
                                              f"invalid wheel file name: {exc}"),))
    if policy is None:
        from ..provenance import Policy

        policy = Policy()
    with _Scratch() as scratch:
        try:
            facts = read_wheel_contents(path, filename, scratch.folder, archive)
        except UNREADABLE as exc:
            return CheckReport(filename, (Finding("wheel", Status.FAIL,
                                                  f"unreadable wheel: {exc}"),))
        return evaluate(facts, policy, target)


def judge_wheels(paths: Sequence[Path], *, jobs: int = 0,
                 policy: Policy | None = None) -> list[CheckReport]:
    """:func:`judge_wheel` on many wheels, in worker processes when there are several."""
    workers = min(jobs or os.cpu_count() or 1, len(paths))
    if workers <= 1:
        return [judge_wheel(path, policy=policy) for path in paths]
    # Imported here: to-wheel checks in its own threads and need not load them.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(partial(judge_wheel, policy=policy), paths))


def judge_written(written: WrittenWheel, members: list[Member], filename: str) -> CheckReport:
    """The verdict on a wheel this process just wrote, from what the writer computed:
    its own files are what wheel/derive.py made (the contract holds by construction)
    and its provenance was verified before it was planned (convert/produce.py)."""
    return evaluate(written_wheel_contents(written, members, filename), None, None, written=True)


def evaluate(facts: WheelContents, policy: Policy | None, target: Target | None = None, *,
             written: bool = False) -> CheckReport:
    """Judge the facts of one wheel against everything its name and records claim, its
    provenance against ``policy`` (skipped for a wheel just ``written``: to-wheel
    compared the bytes it packed with the signature already) and its fit to ``target``."""
    _, _, tags = parse_filename(facts.filename)
    findings = list(facts.findings)
    findings += check_metadata_and_wheel(facts)
    findings += check_members(facts)
    findings += check_names(facts)
    verification: Verification | None = None
    if policy is not None:
        # Before the digest: a signed build's files are named against what was signed.
        from .signature import check_signature

        signature_findings, verification = check_signature(facts, policy)
        findings += signature_findings
    findings += check_digests(facts)
    findings += check_sbom(facts)
    findings += check_variant_json(facts)
    binary_findings, honest, elf_infos = check_binaries(facts, tags)
    findings += binary_findings
    gpu_findings, gpu_code = check_gpu_code(facts, elf_infos)
    findings += gpu_findings
    if not written:
        from .contract import check_contract

        contract = check_contract(facts, gpu_code.binaries, verification)
        if policy is not None and policy.require_signature:
            contract = [_required(f) for f in contract]
        findings += contract
    if target is not None:
        findings += _fit(facts, target, gpu_code.wheel if gpu_code.binaries else None)
    return CheckReport(facts.filename, tuple(findings), honest,
                       gpu_code.to_dict() if gpu_code.binaries else None, verification)


def _required(finding: Finding) -> Finding:
    """Under a policy that requires a signature, a wheel's own files must be covered too:
    by the signature (the folder) or by being derived again (the rest)."""
    if finding.status is not Status.NOT_VERIFIED:
        return finding
    return replace(finding, status=Status.FAIL,
                   message=finding.message + "; the policy requires every file signed or re-derived")


def _fit(facts: WheelContents, target: Target, code: object) -> list[Finding]:
    """The wheel where it would be installed: its package's name free there, its GPU
    code one that runs on the target's GPU."""
    findings = []
    module = kernel_package(facts)
    taken = dict(target.taken)
    tops = {name.split("/", 1)[0].removesuffix(".py") for name in facts.members}
    for top in sorted(tops & taken.keys()):
        what = f"its package {top}/" if top == module else f"its {top}"
        findings.append(Finding("fit", Status.FAIL, f"{what} has a name the target already "
                                                    f"takes: {taken[top]}"))
    provenance = facts.provenance or {}
    variant = provenance.get("variant") if isinstance(provenance.get("variant"), dict) else {}
    gpu_build = isinstance(variant, dict) and variant.get("backend") in ("cuda", "rocm") \
        and not variant.get("noarch")
    if target.gpu is not None and gpu_build:
        from ..kernel.gpu_archs import GpuCode
        from ..kernel.gpu_target import gpu_verdict

        held = code if isinstance(code, GpuCode) else GpuCode()
        if not gpu_verdict(held, target.gpu).runs:
            findings.append(Finding("fit", Status.FAIL, f"it holds {held.describe()}: no code for "
                                                        f"the GPU, {target.gpu.describe()}"))
    return findings


class _Scratch:
    """A temporary folder made only when a binary needs extracting: most wheels of an
    index are small pure-Python ones, and a folder made and removed per wheel costs
    more than checking such a wheel."""

    def __init__(self) -> None:
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def folder(self) -> Path:
        if self._folder is None:
            import tempfile

            self._folder = tempfile.TemporaryDirectory(prefix="kernel-wheels-check-")
        return Path(self._folder.name)

    def __enter__(self) -> _Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._folder is not None:
            self._folder.cleanup()
