"""The output folder: checked before any download, written all at once or not at all.

Wheels are produced in a staging folder inside the output folder (same file system, so
moving them into place is an atomic rename) and placed only when every wheel of the
run is ready. A staging folder carries a lock held by the process that made it, so a
run killed with SIGKILL leaves one behind that the next run recognises and removes,
while two runs at once never touch each other's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import OutputError, OutputExistsError, UsageError
from ..kernel.digest import file_sha256
from ..reading import parse_json

STAGING_PREFIX = ".kernel-wheels-"
_LOCK = ".lock"
#: A staging folder before it is locked and renamed, and when such a folder is stale.
_NEW_PREFIX = ".kernel-wheels~"
_NEW_MAX_AGE = 60.0


class OutputFolder:
    def __init__(self, path: Path, *, force: bool = False) -> None:
        self.path = path.resolve()
        self.force = force
        #: The outermost folder preflight() created, if it created any.
        self.created: Path | None = None

    def preflight(self) -> None:
        """Fail now, before any network work, if wheels could not be written here."""
        try:
            self._preflight()
        except OSError as exc:  # a folder on the way that may not be looked into
            raise OutputError(f"cannot write wheels to {self.path}: "
                              f"{exc.strerror or exc}") from None

    def _preflight(self) -> None:
        path = self.path
        existing = path
        while not existing.exists():
            if existing.parent == existing:
                break
            existing = existing.parent
        if existing.exists() and not existing.is_dir():
            # -o FILE: a usage error (exit 2), as for index and build (docs/cli-conformance.md)
            raise UsageError(f"cannot write wheels to {path}: {existing} is a file, not a folder")
        if existing != path:
            try:
                path.mkdir(parents=True, exist_ok=True)
                self.created = next(p for p in (path, *path.parents) if p.parent == existing)
            except OSError as exc:
                raise OutputError(f"cannot create the output folder {path}: "
                                  f"{exc.strerror or exc}") from None
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            raise OutputError(f"cannot write wheels to {path}: read-only file system")
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write wheels to {path}: permission denied")

    def discard_if_unused(self) -> None:
        """Remove the folders preflight() created if the run placed nothing in them, so
        that a failed run leaves no trace (a folder holding anything stays)."""
        if self.created is None:
            return
        folder = self.path
        while True:
            try:
                folder.rmdir()
            except OSError:
                return  # not empty: wheels, or another run's files
            if folder == self.created:
                return
            folder = folder.parent

    def remove_stale_staging(self) -> None:
        """Staging folders of runs that died (their lock is free) are removed."""
        for folder in self.path.glob(STAGING_PREFIX + "*"):
            lock = folder / _LOCK
            try:
                fd = os.open(lock, os.O_RDWR)
            except OSError:
                continue  # every staging folder has a lock: this one is not ours
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live run holds it
            else:
                shutil.rmtree(folder, ignore_errors=True)
            finally:
                os.close(fd)
        for folder in self.path.glob(_NEW_PREFIX + "*"):
            # Never locked: its run died in the moment between making and locking it.
            with contextlib.suppress(OSError):
                if time.time() - folder.stat().st_mtime > _NEW_MAX_AGE:
                    shutil.rmtree(folder, ignore_errors=True)

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A private, locked staging folder, removed afterwards whatever happens. It is
        made and locked under another name, then renamed: a folder with the staging
        name always has a lock, held for as long as its run lives, so another run
        never removes a live run's folder."""
        self.remove_stale_staging()
        made = Path(tempfile.mkdtemp(prefix=_NEW_PREFIX, dir=self.path))
        staged = made.with_name(STAGING_PREFIX + made.name.removeprefix(_NEW_PREFIX))
        fd = None
        try:
            fd = os.open(made / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(made, staged)
            yield staged
        finally:
            try:
                # Both names: an interruption just after the rename must not leave the
                # folder behind under the name the cleanup did not know yet.
                _remove_uninterrupted(made, staged)
            finally:
                if fd is not None:
                    os.close(fd)

    @contextmanager
    def placing(self) -> Iterator[None]:
        """Held (a lock on the folder itself) while a run looks for clashes and places its
        wheels: two runs into one folder place one after the other, so each places all
        its wheels or none, never half of them next to half of the other's."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def conflict(self, filename: str, temp: Path) -> str | None:
        """Why placing ``temp`` as ``filename`` would replace a different wheel, or None."""
        final = self.path / filename
        if not final.exists() or self.force or file_sha256(final) == file_sha256(temp):
            return None
        ours, theirs = _commit_of(temp), _commit_of(final)
        if ours and theirs and ours != theirs:
            return (f"{final} was made from commit {theirs[:12]}, but the source now gives commit "
                    f"{ours[:12]} for this version (was the tag moved?); use --force to replace it")
        return f"{final} exists with different content (use --force to replace it)"

    def place(self, filename: str, temp: Path) -> str:
        """Move a finished wheel into place: ``written``, ``replaced`` or ``unchanged``."""
        final = self.path / filename
        temp.chmod(0o644)
        try:
            os.link(temp, final)  # creates the name only if nobody else did: atomic
            return "written"
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
                raise
            if not final.exists():
                os.replace(temp, final)
                return "written"
        if file_sha256(final) == file_sha256(temp):
            return "unchanged"
        if not self.force:
            raise OutputExistsError(self.conflict(filename, temp) or
                                    f"{final} exists with different content")
        os.replace(temp, final)
        return "replaced"


def _commit_of(wheel: Path) -> str | None:
    """The commit recorded in a wheel's provenance, if it has one."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".dist-info/kernel_wheels.json")), None)
            if name is None:
                return None
            commit = parse_json(zf.read(name)).get("commit")
    except (OSError, zipfile.BadZipFile, ValueError, AttributeError):
        return None
    return commit if isinstance(commit, str) else None


def _remove_uninterrupted(*folders: Path) -> None:
    """Remove ``folders`` even if Ctrl-C or SIGTERM arrives meanwhile: the interruption
    is raised once they are gone (an interruption at the start of the removal left a
    whole staging folder behind, about once in 250 signals)."""
    interruption: BaseException | None = None
    for _ in range(5):  # a few more signals still end in no folder, then give up
        try:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
            break
        except BaseException as exc:  # KeyboardInterrupt, or the CLI's SIGTERM exception
            interruption = interruption or exc
    if interruption is not None:
        raise interruption
