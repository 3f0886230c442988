"""Linux ELF binaries: architecture, NEEDED, RPATH and ``PyInit_<name>`` (the
manylinux policy is ``manylinux.py``, the limited API ``abi3.py``)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from typing import TYPE_CHECKING

from .. import data
from .report import Finding, Status

if TYPE_CHECKING:  # types only: the reader is imported where a binary is read
    from ..elf.reader import ElfInfo


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
    # a tvm-ffi kernel's library (kernel-builder names it like a module) is loaded by
    # tvm_ffi.load_module, which calls the __tvm_ffi_<name> functions it exports
    tvm_ffi = any(name.startswith("__tvm_ffi_") for name in info.init_functions)
    if module and f"PyInit_{module}" not in info.init_functions and not tvm_ffi:
        findings.append(Finding("elf", Status.FAIL,
                                f"{info.arcname} is an extension module without PyInit_{module}"))
    return findings
