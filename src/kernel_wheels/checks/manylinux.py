"""The manylinux verdict: the lowest policy the wheel's ELF binaries honestly meet,
against the manylinux tags the file name claims.

auditwheel's policies (its ``manylinux-policy.json``, read through ``WheelPolicies``) and
its rules, applied to the facts ``elffile`` read once: the symbol-version policy (every
``GLIBC_x``/``GLIBCXX_x``/``CXXABI_x``/``GCC_x`` version needed), the library policy (every
NEEDED library must be in the policy's whitelist, inside the wheel, or provided by the
framework the kernel runs in: torch's and CUDA's libraries are excluded, as
``auditwheel --exclude`` would), the symbol blacklists and ``PyFPE_jbuf``. Nothing is
grafted, so a library outside every whitelist means no manylinux policy at all.
``tests/test_check.py`` keeps this verdict equal to ``auditwheel show``'s.
"""

from __future__ import annotations

import fnmatch
from functools import cache
from typing import Any

from .. import data
from .elffile import ElfInfo
from .report import Finding, Status

_LOADERS = ("ld-linux", "ld64.so")


@cache
def _policies(arch: str) -> Any:
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    return WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch))


def _provided_by_framework(library: str) -> bool:
    return any(fnmatch.fnmatchcase(library, pattern)
               for pattern in data.load("binaries")["provided_by_framework"])


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


def honest_policy(infos: list[ElfInfo], arch: str) -> tuple[Any, list[str]]:
    """(the highest-priority policy all binaries meet, the libraries outside every policy)."""
    policies = _policies(arch)
    inside = {name for info in infos for name in (info.soname, info.arcname.rsplit("/", 1)[-1])
              if name}
    versions: dict[str, set[str]] = {}
    external: set[str] = set()
    undefined: set[str] = set()
    for info in infos:
        undefined |= info.undefined
        for library, needed in info.version_needs.items():
            if library.startswith(_LOADERS) or _provided_by_framework(library):
                continue  # a framework library's own versions are the framework's business
            versions.setdefault(library, set()).update(needed)
        for library in info.needed:
            if not (library.startswith(_LOADERS) or library in inside
                    or _provided_by_framework(library)):
                external.add(library)
    symbol_policy = policies.versioned_symbols_policy(versions)
    candidates = [symbol_policy]
    # The library policy: the highest whose whitelist holds every external library.
    library_policy = max((p for p in policies if p is policies.linux or external <= p.whitelist),
                         key=lambda p: p.priority)
    candidates.append(library_policy)
    blacklisted = [p for p in policies
                   if any(undefined & symbols for lib, symbols in p.blacklist.items()
                          if lib in external | {n for i in infos for n in i.needed})]
    if blacklisted:
        candidates.append(max((p for p in policies if p not in blacklisted),
                              key=lambda p: p.priority))
    if "PyFPE_jbuf" in undefined:
        candidates.append(policies.linux)
    outside = sorted(lib for lib in external if not any(
        lib in p.whitelist for p in policies if p is not policies.linux))
    return min(candidates, key=lambda p: p.priority), outside


def manylinux_findings(infos: list[ElfInfo],
                       claimed: list[str]) -> tuple[list[Finding], str | None]:
    """Findings for the claimed manylinux tags, and the honest policy's name."""
    arch = claimed[0].split("_", 3)[-1]
    try:
        policies = _policies(arch)
    except ValueError:
        return [Finding("manylinux", Status.FAIL, f"unknown architecture {arch}")], None
    honest, outside = honest_policy(infos, arch)
    if honest is policies.linux:
        detail = f"; libraries outside every policy: {', '.join(outside)}" if outside else ""
        symbols = offending_symbols(infos, policies.lowest.symbol_versions)
        if symbols and not detail:
            detail = ": " + "; ".join(symbols[:8])
        return [Finding("manylinux", Status.FAIL,
                        f"the binaries meet no manylinux policy{detail}")], None
    findings = []
    for tag in claimed:
        try:
            wanted = policies.get_policy_by_name(tag)
        except LookupError:
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
    return findings, str(honest.name)
