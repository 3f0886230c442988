"""A kernel's source tree as untrusted input: what a build reads from it must be the
tree's own.

A tree comes from anyone (a pull request, a Hub repository, an archive). Left unchecked,
a path in ``build.toml`` (``src = ["/home/me/.ssh/id_rsa"]``, ``"../../x"``) or a link in
the Python package (``torch-ext/<pkg>/notes.txt -> /etc/shadow``, or the package folder
itself a link) copies files from anywhere on the build machine into the build output,
and ``to-wheel`` then publishes them. So every path ``build.toml`` names is a relative
path of plain parts, and every link met on the way (in the named path, or in the package)
must lead to a place inside the tree, as conversion demands of ``build/`` folders
(:mod:`kernel_wheels.kernel.layout`). A link between two places of the tree is the tree's
own business (a header kept once) and is followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from ..confine import shown
from ..errors import BuildError
from .flags import SHELL_SAFE_TEXT, SHELL_UNSAFE

#: folders never read from the package (Python's byte-code caches)
SKIPPED_FOLDERS = frozenset({"__pycache__"})


def _inside(path: Path, real_root: str) -> bool:
    """``path``, links followed, is ``real_root`` or inside it."""
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root + os.sep)


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
    if not _inside(path, os.path.realpath(root)):
        raise BuildError(f"build.toml: {where} '{shown(name)}' is or passes through a symbolic "
                         "link that leads outside the source tree; refusing to read it")
    return path


def check_folder(root: Path, name: str) -> None:
    """A folder kernel-builder reads without build.toml naming it (``csrc``, on every
    include path) must not be a link that leads out of the tree."""
    path = root / name
    if (path.is_symlink() or path.exists()) and not _inside(path, os.path.realpath(root)):
        raise BuildError(f"{shown(name)} is a symbolic link that leads outside the source tree; "
                         "refusing to build from it")


def package_files(root: Path, package: Path) -> list[tuple[Path, str]]:
    """Every regular file of the Python package folder ``package`` as ``(path, relpath)``
    (relative to the package, sorted), links followed only where they stay inside
    ``root``; ``__pycache__`` folders left out. A link leading out of the tree (or the
    package folder being one), a broken link and anything that is not a file or a
    folder (a FIFO would hang the build, a device never ends) is an error naming it."""
    real_root = os.path.realpath(root)

    def named(path: Path) -> str:
        return shown(path.relative_to(root).as_posix())

    if not _inside(package, real_root):
        raise BuildError(f"{named(package)} is a symbolic link (or inside one) that leads outside "
                         "the source tree; refusing to build from it")
    files: list[tuple[Path, str]] = []
    seen: set[str] = set()
    pending: list[tuple[Path, str]] = [(package, "")]
    while pending:
        folder, prefix = pending.pop()
        real = os.path.realpath(folder)
        if real in seen:  # a link loop, or one folder reached twice through links
            continue
        seen.add(real)
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = Path(entry.path)
                relpath = prefix + entry.name
                if entry.is_symlink():
                    if not _inside(path, real_root):
                        raise BuildError(f"{named(path)} is a symbolic link that leads outside the "
                                         "source tree; refusing to build from it")
                    if not path.exists():
                        raise BuildError(f"{named(path)} is a broken symbolic link")
                mode = path.stat().st_mode  # links followed: inside the tree, checked above
                if stat.S_ISDIR(mode):
                    if entry.name not in SKIPPED_FOLDERS:
                        pending.append((path, relpath + "/"))
                elif stat.S_ISREG(mode):
                    files.append((path, relpath))
                else:
                    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                            else "a device file")
                    raise BuildError(f"{named(path)} is {kind}, not a file; refusing to build "
                                     "from it")
    return sorted(files, key=lambda item: item[1])
