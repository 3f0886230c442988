"""The compiler options of a ``build.toml`` (``cxx-flags``, ``cuda-flags``, ...), checked
when it is read, before anything runs.

They come from the tree, and the compiler drivers take options that turn a build into
running anything: gcc's ``-wrapper /bin/sh,-c,...`` runs a command around every compiler
step, ``-B``/``-specs`` choose the programs it runs, ``-fplugin`` loads a library into
it, ``@file`` reads more options, ``-dumpdir``/``-MF``/``-o`` write wherever they say;
nvcc's ``-ccbin`` picks the host compiler, ``--options-file`` reads options, and
``-Xcompiler`` hands any of gcc's to it. Those are refused (``data/build_flags.json``
lists them, with the reason); the options real kernels pass (optimisation, warnings,
defines, language and target options) are kept. gcc reads ``--name`` as ``-fname`` and
accepts abbreviated long options, so those spellings are refused too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import data
from ..confine import shown

Kind = Literal["compiler", "nvcc"]

#: What a word may hold for a shell to read it as itself (shlex.quote's safe set, ASCII),
#: and the brackets of nvcc's ``code=[sm_90,compute_90]`` (a pattern at worst, never a
#: command). nvcc runs its steps through /bin/sh: the options it passes on sit in double
#: quotes (where ``$(...)`` and backquotes still run) or, for -Xcompiler and the other
#: carriers, in no quotes at all (``-Xcompiler '-O2;sh'`` runs sh). So everything nvcc gets
#: from a tree, options and file names alike, holds only these characters.
SHELL_UNSAFE = re.compile(r"[^\w@%+=:,./\[\]-]", re.ASCII)
SHELL_SAFE_TEXT = "letters, digits and _ @ % + = : , . / - [ ]"


@dataclass(frozen=True)
class RefusedFlag:
    argument: str  # as build.toml gives it: "-Xcompiler=-O2,-wrapper,x"
    option: str  # the refused part: "-wrapper"
    reason: str  # "runs another program during the build"

    def message(self) -> str:
        what = "it" if self.option == self.argument else f"'{shown(self.option)}' in it"
        return (f"'{shown(self.argument)}' is refused: {what} {self.reason} (a build.toml may not "
                "pass options that run programs, load code, read options from files or write "
                "outside the build)")


@functools.cache
def _table() -> dict[str, Any]:
    table: dict[str, Any] = data.load("build_flags")
    return table


@functools.cache
def _rules(name: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern), reason) for pattern, reason in _table()[name])


def _match(rules: str, piece: str) -> str | None:
    for pattern, reason in _rules(rules):
        if pattern.match(piece):
            return str(reason)
    return None


def _compiler_piece(piece: str) -> str | None:
    """The reason gcc or clang must not get ``piece``, or None."""
    if (reason := _match("compiler", piece)) is not None:
        return reason
    if piece.startswith("--"):
        rest = piece[2:]
        # gcc: an unknown --name is -fname (--plugin=x is -fplugin=x)
        if (reason := _match("compiler", "-f" + rest)) is not None:
            return reason
        name = rest.split("=", 1)[0]
        # gcc takes any unique abbreviation of a long option (--out=x is --output=x)
        for long, reason in _table()["compiler_long"].items():
            if name and long.startswith(name):
                return str(reason)
    return None


def _compiler_options(flags: Sequence[str]) -> Iterator[tuple[str, str, str | None]]:
    """(argument, piece, reason) for every option gcc or clang would see in ``flags``."""
    carried: str | None = None  # what the previous argument hands this one to
    for argument in flags:
        if carried == "assembler":
            yield argument, argument, _match("assembler", argument)
        elif carried == "mllvm" and re.match(r"--?load|.*plugin", argument):
            yield argument, argument, "internal"
        carried = {"-Xassembler": "assembler", "-mllvm": "mllvm"}.get(argument)
        yield argument, argument, _compiler_piece(argument)
        # -Wp,a,b hands a and b to the preprocessor (gcc's cc1: the driver's options),
        # -Wa,a,b to the assembler
        if argument.startswith("-Wp,"):
            for piece in argument[4:].split(","):
                yield argument, piece, _compiler_piece(piece)
        elif argument.startswith("-Wa,"):
            for piece in argument[4:].split(","):
                yield argument, piece, _match("assembler", piece)


def _carried(kind: str, value: str) -> Iterator[tuple[str, str | None]]:
    """The pieces of an nvcc carrier's comma-separated value and why each is refused."""
    for piece in value.split(","):
        if kind == "compiler":
            yield piece, _compiler_piece(piece)
        else:
            yield piece, _match("tool", piece)


def _nvcc_options(flags: Sequence[str]) -> Iterator[tuple[str, str, str | None]]:
    table = _table()
    carried: str | None = None
    for argument in flags:
        if (unsafe := SHELL_UNSAFE.search(argument)) is not None:
            yield argument, unsafe[0], "shell"
        if carried is not None:  # the value of -Xcompiler and the like: not nvcc's
            for piece, reason in _carried(carried, argument):
                yield argument, piece, reason
            carried = None
            continue
        if argument.startswith("@"):
            yield argument, argument, "reads"
        if not argument.startswith("-"):
            continue
        name, joined, value = argument.lstrip("-").partition("=")
        # nvcc reads -name and --name alike, and - and _ in names alike
        key = name.replace("_", "-")
        yield argument, argument, table["nvcc"].get(key)
        if key in table["nvcc_carriers"]:
            kind = table["nvcc_carriers"][key]
            if joined:
                for piece, reason in _carried(kind, value):
                    yield argument, piece, reason
            else:
                carried = kind


def refused_flag(flags: Sequence[str], kind: Kind) -> RefusedFlag | None:
    """The first option of ``flags`` a build.toml may not pass to ``kind`` (gcc/clang:
    ``cxx-flags``, ``hip-flags``, ``sycl-flags``; nvcc: ``cuda-flags``), or None."""
    options = _compiler_options(flags) if kind == "compiler" else _nvcc_options(flags)
    for argument, piece, reason in options:
        if reason is not None:
            return RefusedFlag(argument, piece, _table()["reasons"][reason])
    return None
