"""The binaries of a wheel against its tags: each ELF file's structure and linkage, its
manylinux policy and limited API, each Mach-O and PE file's architecture and minimum OS.
The ELF machinery is imported only for a wheel that has an ELF binary (issue #42)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.tags import Tag

from .facts import WheelContents
from .foreign import MACHO_MAGICS, check_macho, check_pe
from .report import Finding, Status

if TYPE_CHECKING:
    from ..elf.reader import ElfInfo

#: The magic of an ELF file (``kernel_wheels.elf.layout.ELF_MAGIC``), here so that a
#: wheel without one never loads the reader.
ELF_MAGIC = b"\x7fELF"

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


def check_binaries(facts: WheelContents,
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
