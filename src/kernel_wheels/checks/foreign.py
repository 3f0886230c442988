"""macOS (Mach-O) and Windows (PE) binaries: what can be checked from here.

Checked: architecture, and the Mach-O minimum OS version against the macosx tag.
Not checked (reported as "not verified"): their library dependencies and symbols.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import data
from ..reading import open_regular
from .report import Finding, Status

MACHO_MAGICS = {b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"\xbe\xba\xfe\xca"}
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32


def _version(packed: int) -> tuple[int, int]:
    return packed >> 16, (packed >> 8) & 0xFF


@dataclass(frozen=True)
class MachoSlice:
    """One architecture of a Mach-O file (a fat file has several)."""

    cputype: int
    #: The minimum macOS it records (``LC_BUILD_VERSION``'s ``minos``, or
    #: ``LC_VERSION_MIN_MACOSX``); None when it records none.
    minimum: tuple[int, int] | None


def macho_slices(path: Path) -> tuple[MachoSlice, ...]:
    """Every architecture of the Mach-O file at ``path``; raises (macholib's own errors,
    ValueError, struct.error, OSError) when it is not a readable one."""
    from macholib.MachO import MachO

    slices = []
    for header in MachO(str(path)).headers:
        minimum = None
        for load_command, command, _data in header.commands:
            if load_command.cmd == LC_BUILD_VERSION:
                minimum = _version(command.minos)
            elif load_command.cmd == LC_VERSION_MIN_MACOSX:
                minimum = _version(command.version)
        slices.append(MachoSlice(header.header.cputype, minimum))
    return tuple(slices)


def macos_needed(paths: Iterable[Path]) -> tuple[int, int] | None:
    """The highest minimum macOS that any Mach-O file among ``paths`` records (other
    files are passed over); None when none records one, or when one cannot be read
    (the check that follows names it)."""
    found: list[tuple[int, int]] = []
    for path in paths:
        with open_regular(path, "a binary", ValueError, limit=None) as stream:
            if stream.read(4) not in MACHO_MAGICS:
                continue
        try:
            found += [s.minimum for s in macho_slices(path) if s.minimum is not None]
        except Exception:  # macholib raises what it likes for a malformed file
            return None
    return max(found, default=None)


def check_macho(path: Path, arcname: str, platform: str) -> list[Finding]:
    """``platform`` is a tag such as ``macosx_26_0_arm64``."""
    _, major, minor, arch = platform.split("_", 3)
    tagged = (int(major), int(minor))
    findings = []
    try:
        slices = macho_slices(path)
    except Exception as exc:
        return [Finding("macho", Status.FAIL, f"{arcname} is not a readable Mach-O file: {exc}")]
    archs = {"arm64": "arm64", "x86_64": "x86_64", "universal2": None}
    wanted_cpu = data.load("binaries")["macho_cputypes"].get(archs.get(arch) or "", None)
    for piece in slices:
        if wanted_cpu is not None and piece.cputype != wanted_cpu:
            findings.append(Finding("macho", Status.FAIL,
                                    f"{arcname} has CPU type {piece.cputype}, not {arch}"))
        minimum = piece.minimum
        if minimum is None:
            findings.append(Finding("macho", Status.NOT_VERIFIED,
                                    f"{arcname} records no minimum macOS version"))
        elif minimum > tagged:
            findings.append(Finding("macho", Status.FAIL,
                                    f"{arcname} needs macOS {minimum[0]}.{minimum[1]} but the "
                                    f"wheel is tagged {platform}"))
        else:
            findings.append(Finding("macho", Status.PASS,
                                    f"{arcname}: macOS {minimum[0]}.{minimum[1]} <= tag, {arch}"))
    findings.append(Finding("macho", Status.NOT_VERIFIED,
                            f"{arcname}: library dependencies and symbols of Mach-O files "
                            "are not verified"))
    return findings


def check_pe(path: Path, arcname: str, platform: str) -> list[Finding]:
    """``platform`` is a tag such as ``win_amd64``."""
    arch = platform.removeprefix("win_")
    with path.open("rb") as stream:
        head = stream.read(4096)
    try:
        (offset,) = struct.unpack_from("<I", head, 0x3C)
        signature = head[offset:offset + 4]
        (machine,) = struct.unpack_from("<H", head, offset + 4)
    except struct.error:
        return [Finding("pe", Status.FAIL, f"{arcname} is not a readable PE file")]
    if signature != b"PE\0\0":
        return [Finding("pe", Status.FAIL, f"{arcname} is not a PE file")]
    wanted = data.load("binaries")["pe_machines"].get(arch)
    findings = []
    if wanted is not None and machine != wanted:
        findings.append(Finding("pe", Status.FAIL,
                                f"{arcname} has machine 0x{machine:x}, not {arch}"))
    else:
        findings.append(Finding("pe", Status.PASS, f"{arcname}: machine matches {arch}"))
    findings.append(Finding("pe", Status.NOT_VERIFIED,
                            f"{arcname}: DLL dependencies and symbols are not verified"))
    return findings
