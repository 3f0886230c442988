"""``kernel-wheels check``: prove that a wheel is what its name claims.

Three steps, one module each: gather the facts (``facts``: read an existing wheel once,
or take what the writer computed), dispatch each binary to the reader for its format,
and judge (``contents``, ``members``, ``digests``, ``sbom``, ``variants``, ``linkage``,
``manylinux``, ``abi3``, ``foreign``).
Nothing here raises for a bad wheel: :func:`check_wheel` returns a :class:`CheckReport`.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename

from .contents import check_metadata_and_wheel, parse_filename
from .digests import check_digests
from .facts import UNREADABLE, WheelContents, read_wheel_contents, written_wheel_contents
from .foreign import MACHO_MAGICS, check_macho, check_pe
from .gpu import check_gpu_code
from .members import check_members
from .report import CheckReport, Finding, Status
from .sbom import check_sbom
from .variants import check_variant_json

# Imported where a wheel needs them (a command pays for what its wheels hold, issue #42):
# the ELF reader and the ELF checks for a wheel with an ELF binary, abi3info for an abi3
# one, the provenance package for a policy to verify under, the writer's types never.
if TYPE_CHECKING:
    import tempfile

    from ..elf.reader import ElfInfo
    from ..provenance import Policy
    from ..wheel.writer import Member, WrittenWheel

#: The magic of an ELF file (``kernel_wheels.elf.layout.ELF_MAGIC``), here so that a
#: wheel without one never loads the reader.
ELF_MAGIC = b"\x7fELF"

__all__ = ["CheckReport", "Finding", "Status", "check_wheel", "check_wheels", "check_written_wheel"]

_LINUX_PLATFORMS = ("manylinux", "linux", "musllinux")
# magic bytes -> (check name, platform tag prefix, description, checker)
_FOREIGN: dict[bytes, tuple[str, str, str, Callable[[Path, str, str], list[Finding]]]] = {
    **{magic: ("macho", "macosx_", "a macOS binary", check_macho) for magic in MACHO_MAGICS},
    b"MZ": ("pe", "win", "a Windows binary", check_pe),
}


def _platform_arch(platform: str) -> str | None:
    for arch in ("x86_64", "aarch64", "i686", "ppc64le", "s390x"):
        if platform.endswith("_" + arch):
            return arch
    return None


def check_wheel(path: Path, *, filename: str | None = None,
                archive: zipfile.ZipFile | None = None, policy: Policy | None = None) -> CheckReport:
    """Run every check on the wheel at ``path``. ``filename`` is the name it claims
    (defaults to the file's own name); ``archive``, the wheel already open, if it is;
    ``policy``: re-verify the wheel's provenance under it (``check``, ``verify``)."""
    filename = filename or path.name
    if not path.is_file():
        what = "is a folder, not a wheel" if path.is_dir() else "does not exist"
        return CheckReport(filename, (Finding("wheel", Status.FAIL, f"{path} {what}"),))
    try:
        parse_filename(filename)
    except InvalidWheelFilename as exc:
        return CheckReport(filename, (Finding("wheel", Status.FAIL,
                                              f"invalid wheel file name: {exc}"),))
    with _Scratch() as scratch:
        try:
            facts = read_wheel_contents(path, filename, scratch.folder, archive)
        except UNREADABLE as exc:
            return CheckReport(filename, (Finding("wheel", Status.FAIL,
                                                  f"unreadable wheel: {exc}"),))
        return evaluate(facts, policy)


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


def check_wheels(paths: list[Path], *, jobs: int = 0, policy: Policy | None = None) -> list[CheckReport]:
    """:func:`check_wheel` on many wheels, in worker processes when there are several."""
    workers = min(jobs or os.cpu_count() or 1, len(paths))
    if workers <= 1:
        return [check_wheel(path, policy=policy) for path in paths]
    # Imported here: to-wheel checks in its own threads and need not load them.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(partial(check_wheel, policy=policy), paths))


def check_written_wheel(written: WrittenWheel, members: list[Member], filename: str) -> CheckReport:
    """Check a wheel this process just wrote, from what the writer computed."""
    return evaluate(written_wheel_contents(written, members, filename))


def evaluate(facts: WheelContents, policy: Policy | None = None) -> CheckReport:
    """Judge the facts of one wheel against everything its name claims (and its
    provenance against ``policy``, when given: to-wheel compared the bytes it packed
    with the signature already, convert/produce.py)."""
    _, _, tags = parse_filename(facts.filename)
    findings = list(facts.findings)
    findings += check_metadata_and_wheel(facts)
    findings += check_members(facts)
    findings += check_digests(facts)
    if policy is not None:
        from .provenance import check_provenance

        findings += check_provenance(facts, policy)[0]
    findings += check_sbom(facts)
    findings += check_variant_json(facts)
    binary_findings, honest, elf_infos = _check_binaries(facts, tags)
    findings += binary_findings
    gpu_findings, gpu_code = check_gpu_code(facts, elf_infos)
    findings += gpu_findings
    return CheckReport(facts.filename, tuple(findings), honest,
                       gpu_code.to_dict() if gpu_code.binaries else None)


def _check_binaries(facts: WheelContents,
                    tags: frozenset[Tag]) -> tuple[list[Finding], str | None, list[ElfInfo]]:
    platforms = sorted({t.platform for t in tags})
    linux = [p for p in platforms if p.startswith(_LINUX_PLATFORMS)]
    findings: list[Finding] = []
    elf_infos: list[ElfInfo] = []
    foreign = False
    for arcname, binary in sorted(facts.binaries.items()):
        if isinstance(binary, bytes):
            head = binary[:4]
        else:
            with binary.open("rb") as stream:
                head = stream.read(4)
        if head == ELF_MAGIC:
            from ..elf.reader import ElfError, read_elf, read_elf_bytes
            from .linkage import check_structure

            try:
                info = read_elf_bytes(binary, arcname) if isinstance(binary, bytes) \
                    else read_elf(binary, arcname)
            except ElfError as exc:
                findings.append(Finding("elf", Status.FAIL, str(exc)))
                continue
            elf_infos.append(info)
            if not linux:
                findings.append(Finding("elf", Status.FAIL, f"{arcname} is a Linux ELF file in a "
                                                            f"wheel for {', '.join(platforms)}"))
            for arch in [_platform_arch(p) for p in linux] or [None]:
                findings += check_structure(info, arch)
        elif (kind := _FOREIGN.get(head[:2]) or _FOREIGN.get(head[:4])) is not None:
            foreign = True
            check, prefix, what, checker = kind
            matching = [p for p in platforms if p.startswith(prefix)]
            if not matching:
                findings.append(Finding(check, Status.FAIL, f"{arcname} is {what} in a wheel "
                                                            f"for {', '.join(platforms)}"))
            with _on_disk(binary, arcname) as path:
                for platform in matching:
                    findings += checker(path, arcname, platform)
        else:
            findings.append(Finding("binary", Status.FAIL,
                                    f"{arcname} is not an ELF, Mach-O or PE binary"))
    honest = None
    manylinux = [p for p in platforms if p.startswith("manylinux")]
    if elf_infos and manylinux:
        wanted_machine = _machine_of(_platform_arch(manylinux[0]))
        # A binary of another architecture already failed above; auditwheel skips it too.
        same_arch = [i for i in elf_infos if wanted_machine is None or i.machine == wanted_machine]
        from .manylinux import manylinux_findings

        policy_findings, honest = manylinux_findings(same_arch or elf_infos, manylinux)
        findings += policy_findings
    elif elf_infos:
        findings.append(Finding("manylinux", Status.NOT_VERIFIED,
                                f"no manylinux tag ({', '.join(platforms)}): glibc "
                                "compatibility not claimed"))
    abi3_tags = [t for t in tags if t.abi == "abi3"]
    if abi3_tags and elf_infos:
        from .abi3 import check_abi3

        findings += check_abi3(elf_infos, max(t.interpreter for t in abi3_tags))
    elif abi3_tags and foreign and facts.path is not None:
        from .abi3 import check_abi3_with_abi3audit

        findings += check_abi3_with_abi3audit(facts.path)
    return findings, honest, elf_infos


@contextmanager
def _on_disk(binary: Path | bytes, arcname: str) -> Iterator[Path]:
    """A binary as a file (the Mach-O and PE readers read files)."""
    if isinstance(binary, Path):
        yield binary
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernel-wheels-check-") as scratch:
        path = Path(scratch) / arcname.rsplit("/", 1)[-1]
        path.write_bytes(binary)
        yield path


def _machine_of(arch: str | None) -> str | None:
    from .. import data

    return data.load("binaries")["elf_machines"].get(arch) if arch else None
