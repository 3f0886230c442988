"""``kernel-wheels check``: prove that a wheel is what its name claims.

One function, :func:`check_wheel`, runs every check that applies and returns a
:class:`CheckReport`; nothing here raises for a bad wheel.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from .abi3 import check_abi3
from .contents import check_metadata_and_wheel, check_record, is_binary_name, parse_filename
from .digests import check_digests, read_provenance
from .elf import ELF_MAGIC, check_structure, manylinux_findings, read_elf
from .foreign import MACHO_MAGICS, check_macho, check_pe
from .report import CheckReport, Finding, Status

__all__ = ["CheckReport", "Finding", "Status", "check_wheel"]


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


def check_wheel(path: Path, *, filename: str | None = None) -> CheckReport:
    """Run every check on the wheel at ``path``. ``filename`` is the name it claims
    (defaults to the file's own name; the converter checks a staged copy)."""
    filename = filename or path.name
    path = path.resolve()  # auditwheel changes the working directory while it runs
    if not path.is_file():
        return CheckReport(filename, (Finding("wheel", Status.FAIL, f"{path} does not exist"),))
    try:
        _, _, tags = parse_filename(filename)
        with zipfile.ZipFile(path) as zf:
            members = [i.filename for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, ValueError) as exc:
        return CheckReport(filename, (Finding("wheel", Status.FAIL, f"unreadable wheel: {exc}"),))

    findings = check_record(path)
    findings += check_metadata_and_wheel(path, filename, members)
    dist_info = next((m.split("/")[0] for m in members if m.endswith(".dist-info/METADATA")), "")
    honest = None
    with zipfile.ZipFile(path) as zf, \
            tempfile.TemporaryDirectory(prefix="kernel-wheels-check-") as scratch:
        findings += check_digests(zf, read_provenance(zf, dist_info))
        binaries = [m for m in members if is_binary_name(m)]
        platforms = sorted({t.platform for t in tags})
        elf_infos = []
        foreign = False
        for arcname in binaries:
            target = Path(scratch) / arcname
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(arcname) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            with target.open("rb") as stream:
                head = stream.read(4)
            if head == ELF_MAGIC:
                info = read_elf(target, arcname)
                elf_infos.append(info)
                linux = [p for p in platforms if p.startswith(("manylinux", "linux", "musllinux"))]
                if not linux:
                    findings.append(Finding("elf", Status.FAIL,
                                            f"{arcname} is a Linux ELF file in a wheel for "
                                            f"{', '.join(platforms)}"))
                for arch in [_platform_arch(p) for p in linux] or [None]:
                    findings += check_structure(info, arch)
            elif (kind := _FOREIGN.get(head[:2]) or _FOREIGN.get(head[:4])) is not None:
                foreign = True
                check, prefix, what, checker = kind
                matching = [p for p in platforms if p.startswith(prefix)]
                if not matching:
                    findings.append(Finding(check, Status.FAIL, f"{arcname} is {what} in a wheel "
                                                                f"for {', '.join(platforms)}"))
                for platform in matching:
                    findings += checker(target, arcname, platform)
            else:
                findings.append(Finding("binary", Status.FAIL,
                                        f"{arcname} is not an ELF, Mach-O or PE binary"))
        manylinux = [p for p in platforms if p.startswith("manylinux")]
        if elf_infos and manylinux:
            policy_findings, honest = manylinux_findings(path, elf_infos, manylinux)
            findings += policy_findings
        elif elf_infos:
            findings.append(Finding("manylinux", Status.NOT_VERIFIED,
                                    f"no manylinux tag ({', '.join(platforms)}): glibc "
                                    "compatibility not claimed"))
        if any(t.abi == "abi3" for t in tags) and (elf_infos or foreign):
            findings += check_abi3(path)
    return CheckReport(filename, tuple(findings), honest)
