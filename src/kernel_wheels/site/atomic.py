"""Atomic file updates and the site lock.

Every file of a site is replaced by ``os.replace`` from a staging folder on the same
file system, so a reader (or a run killed half-way) sees either the old file or the
new one, never a partial one. One exclusive ``flock`` per site serialises runs; the
kernel releases it when a process dies, so a killed run never leaves the site locked.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType


class Staging:
    """A private folder for files about to be moved into place; emptied on entry (what
    an interrupted run left there is garbage) and removed on exit."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._count = 0

    def __enter__(self) -> Staging:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _temp(self, final: Path) -> Path:
        self._count += 1
        return self.folder / f"{self._count}-{final.name}"

    def write(self, final: Path, content: bytes) -> None:
        temp = self._temp(final)
        with temp.open("wb") as stream:
            stream.write(content)
        temp.chmod(0o644)
        os.replace(temp, final)


class SiteLock:
    """An exclusive lock on a site, waiting for another run to finish if need be.

    A run refused on a new site removes the site again, lock file included, while
    another run may be waiting for that lock: a lock taken on a file no longer at
    ``path`` is let go and taken again on the file that is there now."""

    def __init__(self, path: Path, on_wait: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_wait = on_wait
        self._fd: int | None = None

    def __enter__(self) -> SiteLock:
        while True:
            fd = self._lock_once()
            if self._still_there(fd):
                self._fd = fd
                return self
            os.close(fd)

    def _lock_once(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self.on_wait:
                self.on_wait(f"waiting for another kernel-wheels run on {self.path.parent.parent}")
            started = time.monotonic()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            if self.on_wait:
                self.on_wait(f"lock acquired after {time.monotonic() - started:.1f} s")
        return fd

    def _still_there(self, fd: int) -> bool:
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
