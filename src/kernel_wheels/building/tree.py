"""A kernel's source tree as untrusted input: what a build reads from it must be the
tree's own.

A tree comes from anyone (a pull request, a Hub repository, an archive). Left unchecked,
a path in ``build.toml`` (``src = ["/home/me/.ssh/id_rsa"]``, ``"../../x"``) or a link in
the Python package (``torch-ext/<pkg>/notes.txt -> /etc/shadow``, or the package folder
itself a link) copies files from anywhere on the build machine into the build output,
and ``to-wheel`` then publishes them. So every path ``build.toml`` names is a relative
path of plain parts, and every link met on the way (in the named path, or in the package)
must lead to a place inside the tree, as conversion demands of ``build/`` folders (both
walk a folder with :func:`kernel_wheels.confine.regular_files`). A link between two
places of the tree is the tree's own business (a header kept once) and is followed.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ..confine import Problem, Refusal, leads_inside, regular_files, shown
from ..errors import BuildError
from .flags import SHELL_SAFE_TEXT, SHELL_UNSAFE

#: folders never read from the package (Python's byte-code caches)
SKIPPED_FOLDERS = frozenset({"__pycache__"})


def tree_path(root: Path, name: str, where: str) -> Path:
    """``root / name`` for a path that ``build.toml`` names (``where``: ``"[kernel.k] src"``),
    after proving it is the tree's: relative, no ``..`` part, no character a shell reads
    as syntax (nvcc hands file names to one), and no link on the way that leads out of
    the tree. Existence is the caller's question."""
    pure = PurePosixPath(name)
    if not name or "\\" in name or "\0" in name:
        raise BuildError(f"build.toml: {where} '{shown(name)}' is not a path inside the source tree")
    if pure.is_absolute():
        raise BuildError(f"build.toml: {where} '{shown(name)}' is an absolute path: a build reads "
                         "only files of the source tree (name them relative to build.toml)")
    if ".." in pure.parts:
        raise BuildError(f"build.toml: {where} '{shown(name)}' leads outside the source tree (a "
                         "'..' part): a build reads only files of the source tree")
    if (unsafe := SHELL_UNSAFE.search(name)) is not None:
        raise BuildError(f"build.toml: {where} '{shown(name)}' has '{shown(unsafe[0])}' in it, which "
                         "a shell reads as syntax (nvcc runs its steps through one): name the "
                         f"tree's files with {SHELL_SAFE_TEXT}")
    path = root.joinpath(*pure.parts)
    if not leads_inside(path, os.path.realpath(root)):
        raise BuildError(f"build.toml: {where} '{shown(name)}' is or passes through a symbolic "
                         "link that leads outside the source tree; refusing to read it")
    return path


def check_folder(root: Path, name: str) -> None:
    """A folder kernel-builder reads without build.toml naming it (``csrc``, on every
    include path) must not be a link that leads out of the tree."""
    path = root / name
    if (path.is_symlink() or path.exists()) and not leads_inside(path, os.path.realpath(root)):
        raise BuildError(f"{shown(name)} is a symbolic link that leads outside the source tree; "
                         "refusing to build from it")


def package_files(root: Path, package: Path) -> list[tuple[Path, str]]:
    """Every regular file of the Python package folder ``package`` as ``(path, relpath)``
    (relative to the package, sorted), links followed only where they stay inside
    ``root``; ``__pycache__`` folders left out. A link leading out of the tree (or the
    package folder being one), a broken link and anything that is not a file or a
    folder (a FIFO would hang the build, a device never ends) is an error naming it."""

    def refused(refusal: Refusal) -> BuildError:
        named = shown(refusal.path.relative_to(root).as_posix())
        if refusal.problem is Problem.OUTSIDE and not refusal.relpath:
            return BuildError(f"{named} is a symbolic link (or inside one) that leads outside the "
                              "source tree; refusing to build from it")
        if refusal.problem is Problem.LOOP:  # said as a link that leads nowhere
            refusal = replace(refusal, problem=Problem.BROKEN)
        return BuildError(refusal.message(named, "the source tree", "build from it"))

    return regular_files(package, root, refused, skip_folders=SKIPPED_FOLDERS)
