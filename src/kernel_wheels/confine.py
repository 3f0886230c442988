"""Names from outside, checked before they touch the file system.

Every name that comes from a remote answer (a Hub's tree listing, refs and commit ids;
an index page; an HTTP client of ``serve``) or from a source tree is untrusted: it
becomes part of a path only through these functions, which refuse anything that could
lead outside the folder it is meant for (``..``, an absolute path, an empty or ``.``
segment, a backslash, a NUL or other control character, a name too long for the file
system) and, for a path about to be written, prove that the joined path stays inside
its root. A refusal is an :class:`~kernel_wheels.errors.UnsafeNameError` whose message
names where the name came from and shows it escaped on one line.

A folder from outside (a variant folder to pack, a source tree's Python package to
build) is read through :func:`regular_files`: links followed only where they stay
inside the folder's root, no FIFO, socket or device file, each real folder once.
A file's bytes are read by :mod:`kernel_wheels.reading`, a name is shown by
:func:`kernel_wheels.terminal.shown`.
"""

from __future__ import annotations

import enum
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import UnsafeNameError

# Kept importable from here, where they were first: the one reader and the one escaping.
from .reading import MAX_SMALL_FILE as MAX_SMALL_FILE
from .reading import read_regular as read_regular
from .terminal import shown as shown

#: A Hub commit id: the hex digest of a git commit (sha1; sha256 repositories use 64).
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Most file systems cap a name at 255 bytes and a path at 4096.
MAX_SEGMENT = 255
MAX_PATH = 4096
#: Git's rules for ref names (git check-ref-format), which the HF cache uses as paths.
_BAD_REF = re.compile(r"\.\.|@\{|[\x00-\x20\x7f~^:?*\[\\]|//|/\.|\.lock(/|$)|^\.|^/|/$|\.$")


def relative_path(name: object, where: str) -> PurePosixPath:
    """A relative POSIX path of plain segments (``build/v/_ops.py``), or a refusal naming
    ``where`` it came from (``"drbh/img2gray: a tree listing entry"``)."""
    if not isinstance(name, str) or not name:
        raise UnsafeNameError(f"{where}: {shown(repr(name))} is not a file path")
    if _CONTROL.search(name) or "\\" in name:
        raise UnsafeNameError(f"{where}: '{shown(name)}' has a control character or a "
                              "backslash in it; refusing to use it as a path")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_PATH:
        raise UnsafeNameError(f"{where}: '{shown(name)}' is longer than {MAX_PATH} bytes")
    if name.startswith("/"):
        raise UnsafeNameError(f"{where}: '{shown(name)}' is an absolute path; refusing to "
                              "write outside the folder it belongs in")
    segments = name.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise UnsafeNameError(f"{where}: '{shown(name)}' leads outside its folder (an "
                                  f"empty, '.' or '..' part); refusing to use it as a path")
        if len(segment.encode("utf-8", "surrogateescape")) > MAX_SEGMENT:
            raise UnsafeNameError(f"{where}: '{shown(name)}' has a part longer than "
                                  f"{MAX_SEGMENT} bytes")
    return PurePosixPath(*segments)


def file_name(name: object, where: str) -> str:
    """One path segment (a wheel's file name, a blob name), or a refusal."""
    path = relative_path(name, where)
    if len(path.parts) != 1:
        raise UnsafeNameError(f"{where}: '{shown(str(name))}' is not a plain file name")
    return str(path)


def commit_id(value: object, where: str) -> str:
    """A commit id as the Hub gives it (40 or 64 lowercase hex digits), or a refusal."""
    if not isinstance(value, str) or not _COMMIT.fullmatch(value):
        raise UnsafeNameError(f"{where}: {shown(repr(value))} is not a commit id (40 hex "
                              "digits)")
    return value


def ref_name(value: object, where: str) -> str:
    """A git ref name (``v1.1.2``, ``main``, ``release/1.x``) that is also a safe relative
    path, or a refusal."""
    if not isinstance(value, str) or not value or _BAD_REF.search(value):
        raise UnsafeNameError(f"{where}: {shown(repr(value))} is not a valid git ref name")
    relative_path(value, where)
    return value


def inside(root: Path, relative: str | PurePosixPath, where: str) -> Path:
    """``root / relative`` after proving that it stays inside ``root``: lexically (no
    ``..``), and through the links already on disk (no folder on the way is a link that
    leads out). ``relative`` is checked with :func:`relative_path` first."""
    parts = relative_path(str(relative), where).parts
    target = root.joinpath(*parts)
    real_root = os.path.realpath(root)
    # The parent as it exists now, links followed: a link planted on the way (a folder
    # of the cache replaced by a link to /etc) is found before anything is written.
    if not _under(os.path.realpath(target.parent), real_root):
        raise UnsafeNameError(f"{where}: '{shown(str(relative))}' would be written outside "
                              f"{root} (through a link); refusing")
    return target


class Problem(enum.Enum):
    """Why :func:`regular_files` refuses an entry of a folder (the value: what it is)."""

    OUTSIDE = "a symbolic link that leads outside"
    BROKEN = "a broken symbolic link"
    LOOP = "a symbolic link loop"
    FIFO = "a FIFO"
    SOCKET = "a socket"
    DEVICE = "a device file"


@dataclass(frozen=True)
class Refusal:
    """One entry :func:`regular_files` refuses: its path as walked, its path relative to
    the walked folder (``""``: the folder itself) and the problem; ``reason`` says why a
    loop is one (the operating system's words)."""

    path: Path
    relpath: str
    problem: Problem
    reason: str = ""

    def message(self, named: str, root: str, refusing: str) -> str:
        """The one line, for an entry the caller shows as ``named``, a root it calls
        ``root`` (``the source``) and what it refuses to do (``pack it``)."""
        if self.problem is Problem.BROKEN:
            return f"{named} is {self.problem.value}"
        if self.problem is Problem.OUTSIDE:
            return f"{named} is {self.problem.value} {root}; refusing to {refusing}"
        if self.problem is Problem.LOOP:
            return f"{named} is {self.problem.value} ({self.reason}); refusing to {refusing}"
        return f"{named} is {self.problem.value}, not a file; refusing to {refusing}"


def regular_files(folder: Path, root: Path, refuse: Callable[[Refusal], Exception], *,
                  skip_folders: frozenset[str] = frozenset(),
                  check_name: Callable[[str], object] | None = None) -> list[tuple[Path, str]]:
    """Every regular file under ``folder`` as ``(path, relpath)``, sorted by ``relpath``
    (relative to ``folder``, ``/``-separated), following symbolic links only where they
    stay inside ``root`` (``folder`` itself included: it may be a link within ``root``).
    Anything else is ``refuse(refusal)`` raised: a link leading out of ``root``, a broken
    link, a link loop, and anything that is neither a file nor a folder (a FIFO would
    hang a reader, a device never ends). Each real folder is walked once: a link loop
    ends, and a folder reached twice through links is listed once. Folders named in
    ``skip_folders`` are not entered; ``check_name`` sees each entry's relpath before
    anything else is asked of it (and raises to refuse it). ``OSError`` (an unreadable
    folder) reaches the caller as it is."""
    real_root = os.path.realpath(root)
    if not _under(_resolved(folder, "", refuse), real_root):
        raise refuse(Refusal(folder, "", Problem.OUTSIDE))
    files: list[tuple[Path, str]] = []
    seen: set[str] = set()
    pending = [(folder, "")]
    while pending:
        current, prefix = pending.pop()
        real = os.path.realpath(current)
        if real in seen:  # a link loop, or one folder reached twice through links
            continue
        seen.add(real)
        with os.scandir(current) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                relpath = prefix + entry.name
                if check_name is not None:
                    check_name(relpath)
                path = Path(entry.path)
                if entry.is_symlink():
                    target = _resolved(path, relpath, refuse)
                    if not _under(target, real_root):
                        raise refuse(Refusal(path, relpath, Problem.OUTSIDE))
                    if not os.path.exists(target):
                        raise refuse(Refusal(path, relpath, Problem.BROKEN))
                mode = path.stat().st_mode  # links followed: inside the root, checked above
                if stat.S_ISDIR(mode):
                    if entry.name not in skip_folders:
                        pending.append((path, relpath + "/"))
                elif stat.S_ISREG(mode):
                    files.append((path, relpath))
                else:
                    problem = (Problem.FIFO if stat.S_ISFIFO(mode) else Problem.SOCKET
                               if stat.S_ISSOCK(mode) else Problem.DEVICE)
                    raise refuse(Refusal(path, relpath, problem))
    return sorted(files, key=lambda item: item[1])


def _resolved(path: Path, relpath: str, refuse: Callable[[Refusal], Exception]) -> str:
    """``path`` with every link followed; a link loop is a refusal, not a RuntimeError."""
    try:
        return str(path.resolve(strict=False))
    except (RuntimeError, OSError) as exc:  # 3.11 raises RuntimeError for a loop, 3.13 OSError
        reason = getattr(exc, "strerror", None) or str(exc)
        raise refuse(Refusal(path, relpath, Problem.LOOP, reason)) from None


def leads_inside(path: Path, real_root: str) -> bool:
    """``path``, links followed, is ``real_root`` (a path with no link in it) or inside it."""
    return _under(os.path.realpath(path), real_root)


def _under(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root + os.sep)
