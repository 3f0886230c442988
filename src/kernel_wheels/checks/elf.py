"""Linux ELF binaries: manylinux policy (through auditwheel's analysis, torch's own
libraries excluded), the symbols that break it, architecture, NEEDED, RPATH and
``PyInit_<name>``."""

from __future__ import annotations

import fnmatch
import logging
import posixpath
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

from .. import data
from .report import Finding, Status

ELF_MAGIC = b"\x7fELF"
# auditwheel's analysis changes the process's working directory while it runs, so
# two analyses in threads of one process would break each other.
_AUDITWHEEL_LOCK = threading.Lock()


@dataclass(frozen=True)
class ElfInfo:
    arcname: str
    machine: str
    needed: tuple[str, ...]
    rpaths: tuple[str, ...]
    defined: frozenset[str]
    #: (symbol, "GLIBC_2.32") for every undefined dynamic symbol with a version.
    versioned_imports: tuple[tuple[str, str], ...]


def read_elf(path: Path, arcname: str) -> ElfInfo:
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        needed: list[str] = []
        rpaths: list[str] = []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                tag: Any
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                        rpaths.extend(p for p in getattr(tag, tag.entry.d_tag[3:].lower()).split(":")
                                      if p)
        version_names: dict[int, str] = {}
        versym = elf.get_section_by_name(".gnu.version")
        verneed = elf.get_section_by_name(".gnu.version_r")
        if isinstance(verneed, GNUVerNeedSection):
            for _lib, auxiliaries in verneed.iter_versions():
                for aux in auxiliaries:
                    version_names[aux.entry.vna_other] = aux.name
        defined, imports = set(), []
        dynsym: Any = elf.get_section_by_name(".dynsym")
        if dynsym is not None:
            for index, symbol in enumerate(dynsym.iter_symbols()):
                if not symbol.name:
                    continue
                if symbol.entry.st_shndx != "SHN_UNDEF":
                    defined.add(symbol.name)
                elif isinstance(versym, GNUVerSymSection):
                    ndx = versym.get_symbol(index).entry["ndx"]
                    if isinstance(ndx, int) and (ndx & 0x7FFF) in version_names:
                        imports.append((symbol.name, version_names[ndx & 0x7FFF]))
        return ElfInfo(arcname, elf["e_machine"], tuple(needed), tuple(rpaths),
                       frozenset(defined), tuple(imports))


def extension_module_name(arcname: str) -> str | None:
    """``pkg/_ops_x.abi3.so`` -> ``_ops_x``; None for plain shared libraries."""
    base = arcname.rsplit("/", 1)[-1]
    if not base.endswith(".so") or (base.startswith("lib") and not base.endswith(".abi3.so")):
        return None
    return base.split(".", 1)[0]


def rpath_inside_wheel(rpath: str, arcname: str) -> bool:
    """True for ``$ORIGIN``-relative entries that stay inside the wheel."""
    match = re.fullmatch(r"\$(?:ORIGIN|\{ORIGIN\})(/.*)?", rpath)
    if match is None:
        return False
    folder = posixpath.dirname(arcname)
    target = posixpath.normpath(posixpath.join(folder or ".", (match[1] or "").lstrip("/")))
    return not (target == ".." or target.startswith("../"))


def check_structure(info: ElfInfo, tag_arch: str | None) -> list[Finding]:
    """Architecture, forbidden NEEDED, RPATH inside the wheel, PyInit_<name>."""
    table = data.load("binaries")
    findings = []
    expected = table["elf_machines"].get(tag_arch) if tag_arch else None
    if expected and info.machine != expected:
        findings.append(Finding("elf", Status.FAIL,
                                f"{info.arcname} is {info.machine.removeprefix('EM_')} but the "
                                f"wheel is tagged {tag_arch}"))
    for lib in info.needed:
        for pattern, why in table["forbidden"].items():
            if fnmatch.fnmatchcase(lib, pattern):
                findings.append(Finding("elf", Status.FAIL, f"{info.arcname} links {lib}: {why}"))
    for rpath in info.rpaths:
        if not rpath_inside_wheel(rpath, info.arcname):
            findings.append(Finding("elf", Status.FAIL,
                                    f"{info.arcname} has RPATH/RUNPATH {rpath}, which points "
                                    "outside the wheel"))
    module = extension_module_name(info.arcname)
    if module and f"PyInit_{module}" not in info.defined:
        findings.append(Finding("elf", Status.FAIL,
                                f"{info.arcname} is an extension module without PyInit_{module}"))
    return findings


def offending_symbols(infos: list[ElfInfo], symbol_versions: dict[str, frozenset[str]]) -> list[str]:
    """``GLIBC_2.32: __libc_single_threaded in pkg/x.so`` for symbols above a policy."""
    lines = []
    for info in infos:
        for symbol, version in info.versioned_imports:
            family, _, number = version.rpartition("_")
            allowed = symbol_versions.get(family)
            if allowed is not None and number not in allowed:
                lines.append(f"{version}: {symbol} in {info.arcname}")
    return sorted(set(lines))


def manylinux_findings(wheel: Path, infos: list[ElfInfo],
                       claimed: list[str]) -> tuple[list[Finding], str | None]:
    """auditwheel's verdict, with torch's libraries excluded, against the claimed tags."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.wheel_abi import NonPlatformWheelError, analyze_wheel_abi

    logging.getLogger("auditwheel").setLevel(logging.ERROR)
    excluded = data.load("binaries")["provided_by_framework"]
    arch_name = claimed[0].split("_", 3)[-1] if claimed else None
    try:
        architecture = Architecture(arch_name) if arch_name else None
    except ValueError:
        architecture = None
    try:
        with _AUDITWHEEL_LOCK:
            result = analyze_wheel_abi(Libc.GLIBC, architecture, wheel.resolve(),
                                       frozenset(excluded), disable_isa_ext_check=True,
                                       allow_graft=False)
    except NonPlatformWheelError:
        return [], None
    except Exception as exc:  # auditwheel raises many kinds; report, never crash
        return [Finding("manylinux", Status.FAIL, f"auditwheel could not analyse: {exc}")], None
    honest = result.overall_policy
    findings = []
    if honest.name == "linux" or not honest.name.startswith("manylinux"):
        unknown = sorted({lib for ref in result.external_refs.values() for lib in ref.libs})
        detail = f"; libraries outside every policy: {', '.join(unknown)}" if unknown else ""
        findings.append(Finding("manylinux", Status.FAIL,
                                f"the binaries meet no manylinux policy{detail}"))
        return findings, None
    for tag in claimed:
        try:
            wanted = result.policies.get_policy_by_name(tag)
        except Exception:
            findings.append(Finding("manylinux", Status.FAIL, f"unknown manylinux tag {tag}"))
            continue
        if wanted.priority > honest.priority:
            symbols = offending_symbols(infos, wanted.symbol_versions)
            detail = "; ".join(symbols[:8]) + (f"; and {len(symbols) - 8} more"
                                               if len(symbols) > 8 else "")
            findings.append(Finding(
                "manylinux", Status.FAIL,
                f"tagged {tag} but the binaries need {honest.name}"
                + (f": {detail}" if detail else "")))
        else:
            findings.append(Finding("manylinux", Status.PASS,
                                    f"{tag} holds (the binaries need {honest.name}; "
                                    "torch-provided libraries excluded)"))
    return findings, honest.name
