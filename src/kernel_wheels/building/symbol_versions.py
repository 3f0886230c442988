"""Keeping a linked extension's imported symbol versions within manylinux_2_28 when the
build machine's C and C++ libraries are newer, with the machine's own compiler (as the
manylinux toolchains do, where kernel-builder pins an older one).

Three kinds of newer symbol appear, and each has an honest fix:

- **libstdc++** (``GLIBCXX_3.4.29``: ``std::to_chars(char*, char*, double)``, gcc 11).
  Red Hat's devtoolset, which kernel-builder builds with, links exactly the parts of
  the newer libstdc++ that the system's lacks statically into each binary (its
  ``libstdc++_nonshared.a``); everything older still comes from ``libstdc++.so.6``.
  Here: the members of the compiler's own ``libstdc++.a`` that define the newer
  symbols go into a small archive linked with ``--exclude-libs``, so their symbols
  are local to the extension, neither exported nor seen by other libraries.
- **glibc functions that only got a newer version** (``dlsym@GLIBC_2.34``: glibc 2.34
  moved libdl and libpthread into libc under new versions, same ABI; ``exp@GLIBC_2.29``;
  and glibc 2.38's C23 names, ``__isoc23_strtoul``, which its headers substitute for
  ``strtoul`` when compiling C++). A binary linked against glibc 2.28 imports the old
  version (or the C99 function), which every newer glibc still provides. Here:
  ``--wrap`` sends the extension's references to a one-instruction trampoline that
  jumps to that version, for the functions listed in ``data/build_toolchain.json``.
- **glibc symbols with no older equivalent** that the libstdc++ members above use
  (``__libc_single_threaded@GLIBC_2.32``, ``arc4random@GLIBC_2.36``,
  ``stat@GLIBC_2.33``): ``build_support/glibc_compat.c`` defines them inside the
  extension (hidden), so glibc's are never asked for.

Link, read the imports, fix, link again, until nothing fixable is left (a pulled-in
libstdc++ member can need another). Whatever is still above the limit is left for the
extension check to report, naming the symbols.
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
from .environment import tool_environment

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
class Binding:
    """An imported glibc symbol sent to ``target@version`` instead."""

    symbol: str  # __isoc23_strtoul
    target: str  # strtoul
    version: str  # GLIBC_2.2.5

    def __str__(self) -> str:
        if self.target == self.symbol:
            return f"{self.symbol}@{self.version}"
        return f"{self.symbol} -> {self.target}@{self.version}"


@dataclass(frozen=True)
class PolicyFixes:
    """What was done to stay within the policy: libstdc++ symbols linked statically,
    glibc functions bound to older versions, glibc symbols defined locally."""

    static_libstdcxx: tuple[SymbolVersion, ...] = ()
    older_glibc: tuple[Binding, ...] = ()
    local_definitions: tuple[SymbolVersion, ...] = ()


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


def _tool(name: str, prefix: str = "") -> str:
    """A binutils program; for a cross build, the target's (``aarch64-linux-gnu-nm``)."""
    found = shutil.which(prefix + name)
    if found is None:
        raise BuildError(f"'{prefix}{name}' (GNU binutils) is needed to keep the extension within "
                         f"manylinux_2_28: install {'binutils' if not prefix else prefix + 'binutils'}")
    return found


def _run(command: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=tool_environment())
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
def _archive_definitions(archive: Path, prefix: str) -> dict[str, str]:
    """symbol -> the first archive member defining it (``nm`` over ``libstdc++.a``); a
    strong definition before a weak one (template instantiations, such as
    ``std::basic_ostringstream<char>``'s constructors in ``sstream-inst.o``, are weak)."""
    strong: dict[str, str] = {}
    weak: dict[str, str] = {}
    for line in _run([_tool("nm", prefix), "-A", "-P", "--defined-only", str(archive)]).splitlines():
        # "/path/libstdc++.a[member.o]: symbol T 0000 0010"
        match = re.match(r".*\[([^\]]+)\]: (\S+) ([A-Za-z]) ", line)
        if match and match[3] not in "Uu":
            (weak if match[3] in "VvWw" else strong).setdefault(match[2], match[1])
    return {**weak, **strong}


def _libstdcxx_archive(members: set[str], cxx: str, prefix: str, folder: Path) -> list[str]:
    archive = _compiler_file(cxx, "libstdc++.a")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    _run([_tool("ar", prefix), "x", str(archive), *sorted(members)], cwd=folder)
    _run([_tool("ar", prefix), "rcsD", f"lib{ARCHIVE_NAME}.a", *sorted(members)], cwd=folder)
    # Before the default -lstdc++ that g++ appends last, and made local.
    return [f"-L{folder}", f"-Wl,--exclude-libs,lib{ARCHIVE_NAME}.a", f"-l{ARCHIVE_NAME}"]


# --- glibc: trampolines to older versions ---------------------------------------------


@functools.cache
def _library_versions(library: Path, prefix: str) -> dict[str, tuple[str, ...]]:
    """symbol -> every version ``library`` defines it at (``nm -D``)."""
    versions: dict[str, list[str]] = {}
    command = [_tool("nm", prefix), "-D", "--defined-only", "--with-symbol-versions", str(library)]
    for line in _run(command).splitlines():
        match = re.search(r"\s(\S+?)@@?(GLIBC_[\d.]+)$", line)
        if match:
            versions.setdefault(match[1], []).append(match[2])
    return {k: tuple(v) for k, v in versions.items()}


def _binding(symbol: str, cxx: str, prefix: str) -> Binding | None:
    """Where an over-limit glibc function can be sent instead: the newest version
    within the limit of the same function (same ABI) or of the one it replaces."""
    table = data.load("build_toolchain")
    same_abi: dict[str, list[str]] = table["glibc_same_abi"]
    target = table["glibc_replacements"].get(symbol)
    libraries = list(same_abi) if target else [lib for lib, names in same_abi.items() if symbol in names]
    limits = _limits()
    for library in libraries:
        found = _library_versions(_compiler_file(cxx, library), prefix).get(target or symbol, ())
        within = [v for v in found if _within(v, limits)]
        if within:
            newest = max(within, key=lambda v: version_tuple(v.rpartition("_")[2]))
            return Binding(symbol, target or symbol, newest)
    return None


#: one jump that leaves registers and stack untouched, so any signature works
_JUMP = {"x86_64": "jmp {target}@PLT", "aarch64": "b {target}"}


def _trampolines(bindings: dict[str, Binding], cxx: str, arch: str, folder: Path) -> list[str]:
    """An object whose ``__wrap_<f>`` jumps to ``target@<older version>``, and the
    ``--wrap`` options using it."""
    jump = _JUMP.get(arch)
    if jump is None:
        raise BuildError(f"binding glibc functions to older versions is not supported on {arch}")
    lines = ["    .text"]
    for symbol, binding in sorted(bindings.items()):
        local = f"kw_old_{symbol}"
        lines += [f"    .symver {local}, {binding.target}@{binding.version}",
                  f"    .globl __wrap_{symbol}", f"    .hidden __wrap_{symbol}",
                  f"    .type __wrap_{symbol}, %function", f"__wrap_{symbol}:",
                  f"    {jump.format(target=local)}",
                  f"    .size __wrap_{symbol}, .-__wrap_{symbol}"]
    lines.append('    .section .note.GNU-stack,"",%progbits')
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "older_glibc.s").write_text("\n".join(lines) + "\n")
    _run([cxx, "-c", "older_glibc.s", "-o", "older_glibc.o"], cwd=folder)
    return [str(folder / "older_glibc.o"), *(f"-Wl,--wrap={s}" for s in sorted(bindings))]


# --- glibc: local definitions ----------------------------------------------------------


def _local_definitions(symbols: set[str], cxx: str, arch: str, prefix: str, folder: Path) -> list[str]:
    """``build_support/glibc_compat.c`` compiled with the definitions of ``symbols``."""
    from .compile_env import support_dir

    stat_ver = data.load("build_toolchain")["stat_ver"].get(arch)
    xstat = _library_versions(_compiler_file(cxx, "libc.so.6"), prefix).get("__xstat", ())
    folder.mkdir(parents=True, exist_ok=True)
    command = [cxx, "-x", "c", "-std=c11", "-O2", "-fPIC", "-fvisibility=hidden",
               *(f"-DKW_DEFINE_{s}" for s in sorted(symbols)),
               f"-DKW_STAT_VER={stat_ver if stat_ver is not None else -1}",
               f"-DKW_XSTAT_VERSION={min(xstat, default='GLIBC_2.0')}",
               "-c", str(support_dir() / "glibc_compat.c"), "-o", "glibc_compat.o"]
    _run(command, cwd=folder)
    return [str(folder / "glibc_compat.o")]


# --- the loop -------------------------------------------------------------------------


def _fix_libstdcxx(libstdcxx: list[SymbolVersion], members: set[str], cxx: str,
                   prefix: str) -> set[str]:
    """The libstdc++.a members that define ``libstdcxx``, added to ``members``."""
    definitions = _archive_definitions(_compiler_file(cxx, "libstdc++.a"), prefix)
    missing = [s for s in libstdcxx if s.symbol not in definitions]
    if missing:
        raise BuildError(f"the extension needs {missing[0].version} ({missing[0].symbol}), "
                         f"above {data.load('build_toolchain')['manylinux']}, and {cxx}'s "
                         "libstdc++.a does not define it: build with an older compiler")
    new = {definitions[s.symbol] for s in libstdcxx} - members
    if not new:
        raise BuildError(f"linking {', '.join(sorted(members))} from libstdc++.a statically "
                         f"did not remove {libstdcxx[0].version} ({libstdcxx[0].symbol})")
    return members | new


def link_within_policy(link: Callable[[list[str]], None],
                       read_imports: Callable[[], tuple[tuple[str, str], ...]],
                       cxx: str, workdir: Path, arch: str | None = None,
                       tools: str = "") -> PolicyFixes:
    """Link (``link(extra_arguments)``), then relink with the fixes above until no
    fixable imported symbol is above the limit. ``arch`` is the target machine
    (default: this one), ``tools`` the prefix of its binutils (``aarch64-linux-gnu-``)."""
    arch = arch or platform.machine()
    link([])
    toolchain = data.load("build_toolchain")
    static_prefixes = tuple(toolchain["static_libstdcxx_prefixes"])
    local_names = set(toolchain["glibc_local_definitions"])
    members: set[str] = set()
    linked: list[SymbolVersion] = []
    bindings: dict[str, Binding] = {}
    defined: dict[str, SymbolVersion] = {}
    for _round in range(MAX_ROUNDS):
        over = over_limit(read_imports())
        libstdcxx = [s for s in over if s.prefix in static_prefixes]
        glibc = [s for s in over if s.prefix == "GLIBC"]
        new_bindings = {s.symbol: b for s in glibc if s.symbol not in bindings
                        and (b := _binding(s.symbol, cxx, tools)) is not None}
        new_local = {s.symbol: s for s in glibc if s.symbol in local_names and s.symbol not in defined
                     and s.symbol not in new_bindings}
        if not libstdcxx and not new_bindings and not new_local:
            return PolicyFixes(tuple(linked), tuple(b for _, b in sorted(bindings.items())),
                               tuple(v for _, v in sorted(defined.items())))
        if libstdcxx:
            members = _fix_libstdcxx(libstdcxx, members, cxx, tools)
            linked += libstdcxx
        bindings.update(new_bindings)
        defined.update(new_local)
        extra: list[str] = []
        if members:
            extra += _libstdcxx_archive(members, cxx, tools, workdir / "newer-libstdcxx")
        if bindings:
            extra += _trampolines(bindings, cxx, arch, workdir / "older-glibc")
        if defined:
            extra += _local_definitions(set(defined), cxx, arch, tools, workdir / "glibc-compat")
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
        lines.append(f"bound to older glibc versions: {', '.join(map(str, fixes.older_glibc))}")
    if fixes.local_definitions:
        names = ", ".join(f"{s.symbol} ({s.version})" for s in fixes.local_definitions)
        lines.append(f"defined inside the extension (glibc_compat.c): {names}")
    return lines

