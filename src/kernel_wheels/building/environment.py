"""The environment of every program a build runs: an allow-list, not the user's own.

A source tree's code runs inside those programs (a compiler option, a compiler plugin,
a host compiler, code a tree could sneak past the option checks of :mod:`.flags`), and
a user's shell holds secrets: HF_TOKEN, TWINE_PASSWORD, AWS_SECRET_ACCESS_KEY, and
others under names no list of secrets could know. So the children of a build (g++,
nvcc and what it starts, the linker, binutils, pip) get only the variables
``data/build_environment.json`` names: what the toolchains read, and for pip also its
index and proxy settings. A variable a toolchain needs that is not there is added to
that table, never the whole environment passed on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .. import data


def _allowed(name: str, table: dict[str, Any]) -> bool:
    return name in table["names"] or name.startswith(tuple(table["prefixes"]))


def tool_environment(*, network: bool = False,
                     environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (the running one by default) that the build's
    programs may see; ``network``: also pip's settings for downloading."""
    tables: dict[str, Any] = data.load("build_environment")
    kept = [tables["tools"], *([tables["network"]] if network else [])]
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items()
            if any(_allowed(name, table) for table in kept)}
