"""Keeping a linked extension's imported symbol versions within manylinux_2_28 when the
build machine's C and C++ libraries are newer, the way the manylinux toolchains do.

Two kinds of newer symbol can appear, and each has an honest fix:

- **libstdc++** (``GLIBCXX_3.4.29``: ``std::to_chars(char*, char*, double)``, gcc 11).
  Red Hat's devtoolset, which kernel-builder builds with, links exactly the parts of
  the newer libstdc++ that the system's lacks statically into each binary (its
  ``libstdc++_nonshared.a``); everything older still comes from ``libstdc++.so.6``.
  Here: the members of the compiler's own ``libstdc++.a`` that define the newer
  symbols go into a small archive linked with ``--exclude-libs``, so their symbols
  are local to the extension, neither exported nor seen by other libraries.
- **glibc functions moved into libc** (``dlsym@GLIBC_2.34``: glibc 2.34 moved libdl
  and libpthread into libc under new versions, same ABI; torch 2.14's stable-ABI
  headers call ``dlsym``). A binary linked against glibc 2.28 imports the old
  version, which every newer glibc still provides. Here: ``--wrap`` sends the
  extension's references to a one-instruction trampoline that jumps to the old
  version, for the functions listed in ``data/build_toolchain.json`` only.

Link, read the imports, fix, link again, until nothing fixable is left (a pulled-in
libstdc++ member can need another). What cannot be fixed this way (a glibc data
symbol such as ``__libc_single_threaded``) is left for the extension check to report.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import data
from ..errors import BuildError
from .config import version_tuple

ARCHIVE_NAME = "kw_newer_libstdcxx"
MAX_ROUNDS = 6


@dataclass(frozen=True)
class SymbolVersion:
    symbol: str
    version: str  # "GLIBCXX_3.4.29"

    @property
    def prefix(self) -> str:
        return self.version.rpartition("_")[0]


@dataclass(frozen=True)
class PolicyFixes:
    """What was done to stay within the policy: libstdc++ symbols linked statically,
    glibc functions bound to their older version."""

    static_libstdcxx: tuple[SymbolVersion, ...] = ()
    older_glibc: tuple[str, ...] = ()  # "dlsym@GLIBC_2.2.5"


def _limits() -> dict[str, tuple[int, ...]]:
    return {k: version_tuple(v) for k, v in
            data.load("build_toolchain")["symbol_version_limits"].items()}


def _within(version: str, limits: dict[str, tuple[int, ...]]) -> bool:
    prefix, _, number = version.rpartition("_")
    return not (prefix in limits and re.fullmatch(r"\d+(\.\d+)*", number)
                and version_tuple(number) > limits[prefix])


def over_limit(imports: tuple[tuple[str, str], ...]) -> list[SymbolVersion]:
    """Imported (symbol, version) pairs above the manylinux limits of
    ``data/build_toolchain.json``."""
    limits = _limits()
    found = {SymbolVersion(s, v) for s, v in imports if not _within(v, limits)}
    return sorted(found, key=lambda s: (s.version, s.symbol))


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"'{name}' (GNU binutils) is needed to keep the extension within "
                         "manylinux_2_28: install binutils")
    return found


def _run(command: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise BuildError(f"{Path(command[0]).name} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _compiler_file(cxx: str, name: str) -> Path:
    path = Path(_run([cxx, f"-print-file-name={name}"]).strip())
    if not path.is_absolute() or not path.is_file():
        raise BuildError(f"{cxx} has no {name} (install the compiler's development packages)")
    return path


# --- libstdc++: members of libstdc++.a ------------------------------------------------


@functools.cache
def _archive_definitions(archive: Path) -> dict[str, str]:
    """symbol -> the first archive member defining it (``nm`` over ``libstdc++.a``)."""
    definitions: dict[str, str] = {}
    for line in _run([_tool("nm"), "-A", "-P", "--defined-only", str(archive)]).splitlines():
        # "/path/libstdc++.a[member.o]: symbol T 0000 0010"
        match = re.match(r".*\[([^\]]+)\]: (\S+) ([A-Za-z]) ", line)
        if match and match[3] not in "UuVvWw":  # strong definitions only
            definitions.setdefault(match[2], match[1])
    return definitions


def _libstdcxx_archive(members: set[str], cxx: str, folder: Path) -> list[str]:
    archive = _compiler_file(cxx, "libstdc++.a")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    _run([_tool("ar"), "x", str(archive), *sorted(members)], cwd=folder)
    _run([_tool("ar"), "rcsD", f"lib{ARCHIVE_NAME}.a", *sorted(members)], cwd=folder)
    # Before the default -lstdc++ that g++ appends last, and made local.
    return [f"-L{folder}", f"-Wl,--exclude-libs,lib{ARCHIVE_NAME}.a", f"-l{ARCHIVE_NAME}"]


# --- glibc: trampolines to older versions ---------------------------------------------


@functools.cache
def _libc_versions(libc: Path) -> dict[str, tuple[str, ...]]:
    """function -> every version libc defines it at (``objdump -T``)."""
    versions: dict[str, list[str]] = {}
    for line in _run([_tool("objdump"), "-T", str(libc)]).splitlines():
        match = re.search(r"\s\(?(GLIBC_[\d.]+)\)?\s+(\S+)$", line)
        if match and " DF " in line and "*UND*" not in line:
            versions.setdefault(match[2], []).append(match[1])
    return {k: tuple(v) for k, v in versions.items()}


def _older_version(symbol: str, cxx: str) -> str | None:
    if symbol not in data.load("build_toolchain")["glibc_moved_functions"]:
        return None
    limits = _limits()
    candidates = [v for v in _libc_versions(_compiler_file(cxx, "libc.so.6")).get(symbol, ())
                  if _within(v, limits)]
    return max(candidates, key=lambda v: version_tuple(v.rpartition("_")[2])) if candidates else None


_JUMP = {"x86_64": "jmp {target}@PLT", "aarch64": "b {target}"}


def _trampolines(bindings: dict[str, str], cxx: str, folder: Path) -> list[str]:
    """An object whose ``__wrap_<f>`` jumps to ``f@<older version>`` (registers and
    stack untouched, so any signature works), and the ``--wrap`` options using it."""
    jump = _JUMP.get(platform.machine())
    if jump is None:
        raise BuildError(f"binding glibc functions to older versions is not supported on "
                         f"{platform.machine()}")
    lines = ["    .text"]
    for symbol, version in sorted(bindings.items()):
        target = f"kw_old_{symbol}"
        lines += [f"    .symver {target}, {symbol}@{version}",
                  f"    .globl __wrap_{symbol}", f"    .hidden __wrap_{symbol}",
                  f"    .type __wrap_{symbol}, %function", f"__wrap_{symbol}:",
                  f"    {jump.format(target=target)}",
                  f"    .size __wrap_{symbol}, .-__wrap_{symbol}"]
    lines.append('    .section .note.GNU-stack,"",%progbits')
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "older_glibc.s").write_text("\n".join(lines) + "\n")
    _run([cxx, "-c", "older_glibc.s", "-o", "older_glibc.o"], cwd=folder)
    return [str(folder / "older_glibc.o"), *(f"-Wl,--wrap={s}" for s in sorted(bindings))]


# --- the loop -------------------------------------------------------------------------


def link_within_policy(link: Callable[[list[str]], None],
                       read_imports: Callable[[], tuple[tuple[str, str], ...]],
                       cxx: str, workdir: Path) -> PolicyFixes:
    """Link (``link(extra_arguments)``), then relink with the fixes above until no
    fixable imported symbol is above the limit."""
    link([])
    static_prefixes = tuple(data.load("build_toolchain")["static_libstdcxx_prefixes"])
    members: set[str] = set()
    linked: list[SymbolVersion] = []
    bindings: dict[str, str] = {}
    for _round in range(MAX_ROUNDS):
        over = over_limit(read_imports())
        libstdcxx = [s for s in over if s.prefix in static_prefixes]
        glibc = {s.symbol: v for s in over if s.prefix == "GLIBC"
                 and s.symbol not in bindings and (v := _older_version(s.symbol, cxx))}
        if not libstdcxx and not glibc:
            return PolicyFixes(tuple(linked), tuple(f"{s}@{v}" for s, v in sorted(bindings.items())))
        if libstdcxx:
            definitions = _archive_definitions(_compiler_file(cxx, "libstdc++.a"))
            missing = [s for s in libstdcxx if s.symbol not in definitions]
            if missing:
                raise BuildError(f"the extension needs {missing[0].version} ({missing[0].symbol}), "
                                 f"above {data.load('build_toolchain')['manylinux']}, and {cxx}'s "
                                 "libstdc++.a does not define it: build with an older compiler")
            new = {definitions[s.symbol] for s in libstdcxx} - members
            if not new:
                raise BuildError(f"linking {', '.join(sorted(members))} from libstdc++.a statically "
                                 f"did not remove {libstdcxx[0].version} ({libstdcxx[0].symbol})")
            members |= new
            linked += libstdcxx
        bindings.update(glibc)
        extra: list[str] = []
        if members:
            extra += _libstdcxx_archive(members, cxx, workdir / "newer-libstdcxx")
        if bindings:
            extra += _trampolines(bindings, cxx, workdir / "older-glibc")
        link(extra)
    raise BuildError(f"symbols above manylinux_2_28 kept appearing after {MAX_ROUNDS} relinks")


def describe(fixes: PolicyFixes) -> list[str]:
    """Log lines for what :func:`link_within_policy` did."""
    lines: list[str] = []
    if fixes.static_libstdcxx:
        versions = sorted({s.version for s in fixes.static_libstdcxx})
        lines.append(f"linked statically from libstdc++.a ({', '.join(versions)}, newer than "
                     "manylinux_2_28 allows)")
    if fixes.older_glibc:
        lines.append(f"bound to older glibc versions: {', '.join(fixes.older_glibc)}")
    return lines

