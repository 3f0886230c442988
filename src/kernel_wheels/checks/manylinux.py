"""The manylinux verdict: the lowest policy the wheel's ELF binaries honestly meet,
against the manylinux tags the file name claims.

auditwheel's policies (its ``manylinux-policy.json``, the data behind ``WheelPolicies``,
read straight from the installed auditwheel: importing auditwheel's modules costs more
than checking a small wheel) and its rules, applied to the facts the ELF reader
(``kernel_wheels.elf``) read once:
the symbol-version policy (every ``GLIBC_x``/``GLIBCXX_x``/``CXXABI_x``/``GCC_x`` version
needed), the library policy (every NEEDED library must be in the policy's whitelist,
inside the wheel, or provided by the framework the kernel runs in: torch's and CUDA's
libraries are excluded, as ``auditwheel --exclude`` would), the symbol blacklists and
``PyFPE_jbuf``. Nothing is grafted, so a library outside every whitelist means no
manylinux policy at all. ``tests/test_check.py`` keeps this verdict equal to
``auditwheel show``'s.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .. import data
from .report import Finding, Status

if TYPE_CHECKING:  # types only: the reader is imported where a binary is read
    from ..elf.reader import ElfInfo

_LOADERS = ("ld-linux", "ld64.so")


@dataclass(frozen=True)
class Policy:
    """One manylinux policy for one architecture (auditwheel's ``Policy``)."""

    name: str  # "manylinux_2_28_x86_64"
    aliases: tuple[str, ...]
    priority: int  # higher is more compatible (older glibc); "linux" is 0
    symbol_versions: dict[str, frozenset[str]]  # "GLIBC" -> {"2.2.5", ...}
    whitelist: frozenset[str]
    blacklist: dict[str, frozenset[str]]


@dataclass(frozen=True)
class Policies:
    all: tuple[Policy, ...]  # lowest priority first

    @property
    def linux(self) -> Policy:
        return self.all[0]

    @property
    def lowest(self) -> Policy:
        return self.all[1]

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.all)

    def get_policy_by_name(self, name: str) -> Policy:
        for policy in self.all:
            if name == policy.name or name in policy.aliases:
                return policy
        raise LookupError(f"no policy named {name}")

    def versioned_symbols_policy(self, versions: dict[str, set[str]]) -> Policy:
        """The highest policy allowing every ``FAMILY_x.y`` version needed (auditwheel's
        rule: only the families a policy names are judged)."""
        needed: dict[str, set[str]] = {}
        for library_versions in versions.values():
            for version in library_versions:
                family, _, number = version.partition("_")
                needed.setdefault(family, set()).add(number)
        for policy in reversed(self.all):
            if all(numbers <= policy.symbol_versions[family]
                   for family, numbers in needed.items() if family in policy.symbol_versions):
                return policy
        return self.linux


def _policy_file() -> Path:
    spec = importlib.util.find_spec("auditwheel")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("auditwheel is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "policy" / "manylinux-policy.json"


@cache
def _policies(arch: str) -> Policies:
    raw = json.loads(_policy_file().read_text("utf-8"))
    found = []
    for entry in raw:
        if entry["name"] != "linux" and arch not in entry["symbol_versions"]:
            continue
        versions = entry["symbol_versions"].get(arch, {}) if entry["name"] != "linux" else {}
        found.append(Policy(
            name=f"{entry['name']}_{arch}",
            aliases=tuple(f"{alias}_{arch}" for alias in entry["aliases"]),
            priority=entry["priority"],
            symbol_versions={family: frozenset(v) for family, v in versions.items()},
            whitelist=frozenset(entry["lib_whitelist"]),
            blacklist={lib: frozenset(v) for lib, v in entry["blacklist"].items()},
        ))
    if len(found) < 2:
        raise ValueError(f"no manylinux policy for {arch}")
    return Policies(tuple(sorted(found, key=lambda p: p.priority)))


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


def honest_policy(infos: list[ElfInfo], arch: str) -> tuple[Policy, list[str]]:
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
