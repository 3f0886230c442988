"""The wheel cache on disk: converted wheels by commit, bounded in size.

Layout (``CACHE`` is ``--cache``)::

    CACHE/wheels/<commit>/<wheel>            the wheel; its presence means "complete"
    CACHE/wheels/<commit>/<wheel>.metadata   its METADATA (the PEP 658 file)
    CACHE/wheels/<commit>/<wheel>.json       its facts: sha256, size, metadata sha256
    CACHE/wheels/<commit>/<wheel>.verdict.json  the verdict under the last policy that judged
                                             it (a digest of the policy, and why it refuses the
                                             wheel, or null); without the wheel: a conversion
                                             that policy refused
    CACHE/locks/<commit>/<wheel>.lock        held while the wheel is being made
    CACHE/locks/<commit>/<wheel>.failed      the last failure, for its back-off window
    CACHE/listings/<org>--<name>.json        the last Hub listing of each kernel
    CACHE/staging/                           conversions in progress (removed if abandoned)

Every part of these paths that comes from outside (a commit id from the Hub's refs, a
wheel's file name from a listing) is checked by :mod:`kernel_wheels.confine` before it
is used: a commit id is 40 (or 64) hex digits, a file name one plain segment, and the
joined path must stay inside ``CACHE`` through any link on disk. A refused name is an
:class:`~kernel_wheels.errors.UnsafeNameError`, raised before anything is read or
written. The eviction scan follows no link and touches only commit-named folders, so a
link planted in the cache cannot make it delete files elsewhere.

A wheel is placed with renames, metadata and facts first and the wheel last, so a
reader never sees half an entry. The lock is an ``flock``, so two requests for the same
wheel, in one process or in several ``--workers``, make it once; the kernel drops the
lock of a process that dies.

Size: after a new wheel is placed, the least recently used wheels are removed until
wheels, metadata and facts together fit ``limit`` bytes. "Used" is the wheel's
modification time, set on every hit (access times are often not kept). A wheel being
sent is never cut short: it was opened before the eviction, and an open file outlives
its name. The listings are a few kilobytes and are not counted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..confine import commit_id, file_name, inside
from ..errors import ServeError, UnsafeNameError
from ..index.wheelfacts import WheelFacts
from ..reading import read_json
from ..site.atomic import SiteLock
from .logs import EventLog

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CachedWheel:
    path: Path
    facts: WheelFacts

    @property
    def metadata_path(self) -> Path:
        return self.path.with_name(self.path.name + ".metadata")


@dataclass(frozen=True)
class StoredFailure:
    """A conversion's failure as another worker process recorded it."""

    message: str
    upstream: bool
    #: Wall-clock seconds (processes share no monotonic clock) until it may be tried again.
    until: float


@dataclass(frozen=True)
class CacheUsage:
    wheels: int
    bytes: int
    limit: int


def _facts_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".json")


#: A wheel's files besides itself, removed with it.
_EXTRAS = (".metadata", ".json", ".verdict.json")


@dataclass(frozen=True)
class Verdict:
    """What a policy decided of a wheel (a cached one, or a conversion it refused)."""

    #: Which policy (``Policy.fingerprint``).
    policy: str
    #: Why it refuses the wheel; None: the wheel passes.
    refusal: str | None


class WheelCache:
    def __init__(self, root: Path, limit: int, events: EventLog) -> None:
        self.root, self.limit, self.events = root, limit, events
        self.wheels = root / "wheels"
        self.locks = root / "locks"
        self.listings = root / "listings"
        self.staging = root / "staging"
        # Facts never change for a name at a commit: remembered once read.
        self._facts: dict[tuple[str, str], WheelFacts] = {}
        self._facts_lock = threading.Lock()

    def prepare(self) -> None:
        for folder in (self.wheels, self.locks, self.listings, self.staging):
            folder.mkdir(parents=True, exist_ok=True)

    def path(self, commit: str, filename: str) -> Path:
        """``CACHE/wheels/<commit>/<filename>`` to read, the names checked first (a
        commit id and a plain file name cannot lead out; reads take no more: pages ask
        for every wheel's facts, on the event loop)."""
        return self._named("wheels", commit, filename)

    def _named(self, folder: str, commit: str, filename: str) -> Path:
        where = f"serve cache ({folder})"
        commit_id(commit, where)  # names from the Hub: an UnsafeNameError (its fault)
        file_name(filename, where)
        return self.root / folder / commit / filename

    def _inside(self, folder: str, commit: str, filename: str) -> Path:
        """A path to write: named as :meth:`_named`, and inside the cache through
        whatever links are on disk."""
        self._named(folder, commit, filename)
        return self._linked_inside(f"{folder}/{commit}/{filename}", f"serve cache ({folder})")

    def _linked_inside(self, relative: str, where: str) -> Path:
        """The cache's root, not the folder, is the bound: a folder of the cache replaced
        by a link that leads out is refused too. That is the disk's fault, not the
        Hub's: a ServeError (HTTP 500)."""
        try:
            return inside(self.root, relative, where)
        except UnsafeNameError as exc:
            raise ServeError(exc.message) from None

    def listing_path(self, name: str) -> Path:
        """``CACHE/listings/<name>``."""
        where = "serve cache (listings)"
        return self._linked_inside(f"listings/{file_name(name, where)}", where)

    def known_facts(self, commit: str, filename: str) -> WheelFacts | None:
        """The facts of a wheel converted once (by any process), without opening it.
        They stay true after an eviction: the same commit converts to the same bytes."""
        key = (commit, filename)
        if (facts := self._facts.get(key)) is not None:
            return facts
        path = _facts_path(self.path(commit, filename))
        try:
            facts = WheelFacts.from_json(filename, read_json(path, "a cache record", ValueError))
        except (OSError, ValueError, TypeError, AssertionError):
            return None
        # They become response headers (ETag) and page hashes: nothing but hex digits.
        if not (_SHA256.fullmatch(facts.sha256) and _SHA256.fullmatch(facts.metadata_sha256)):
            return None
        with self._facts_lock:
            self._facts[key] = facts
        return facts

    def lookup(self, commit: str, filename: str) -> CachedWheel | None:
        """The cached wheel, if it is complete."""
        path = self.path(commit, filename)
        if not path.is_file():
            return None
        facts = self.known_facts(commit, filename)
        return CachedWheel(path, facts) if facts is not None else None

    @contextlib.contextmanager
    def making(self, commit: str, filename: str,
               on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """Held while a wheel is made: others wanting it wait (``on_wait`` is told), then
        find it cached."""
        with SiteLock(self._inside("locks", commit, f"{filename}.lock"), on_wait):
            yield

    def record_failure(self, commit: str, filename: str, failure: StoredFailure) -> None:
        """Tell the other worker processes that making this wheel failed (written while
        holding its lock, read by the next holder)."""
        path = self._inside("locks", commit, f"{filename}.failed")
        temp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
        with contextlib.suppress(OSError):  # a full disk: each process then tries once
            temp.write_text(json.dumps([failure.message, failure.upstream, failure.until]))
            os.replace(temp, path)

    def recorded_failure(self, commit: str, filename: str) -> StoredFailure | None:
        """The failure another process recorded, while its back-off window lasts."""
        path = self._named("locks", commit, f"{filename}.failed")
        try:
            message, upstream, until = read_json(path, "a cache record", ValueError)
            failure = StoredFailure(str(message).splitlines()[0], bool(upstream), float(until))
        except (OSError, ValueError, TypeError, IndexError):
            return None
        return failure if time.time() < failure.until else None

    def verdict(self, commit: str, filename: str) -> Verdict | None:
        """The verdict last recorded for the wheel (by any process), if any."""
        path = self._named("wheels", commit, f"{filename}.verdict.json")
        try:
            policy, refusal = read_json(path, "a cache record", ValueError)
            if not isinstance(policy, str) or not (refusal is None or isinstance(refusal, str)):
                return None
        except (OSError, ValueError, TypeError):
            return None
        return Verdict(policy, refusal.splitlines()[0] if refusal else None)

    def record_verdict(self, commit: str, filename: str, verdict: Verdict) -> None:
        """Keep a verdict for the other worker processes and the next start (a rename:
        a reader sees the whole record or none)."""
        path = self._inside("wheels", commit, f"{filename}.verdict.json")
        temp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
        with contextlib.suppress(OSError):  # a full disk: the verdict is asked again
            path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(json.dumps([verdict.policy, verdict.refusal]))
            os.replace(temp, path)

    def clear_failure(self, commit: str, filename: str) -> None:
        with contextlib.suppress(OSError):
            self._inside("locks", commit, f"{filename}.failed").unlink()

    def place(self, commit: str, wheel: Path, facts: WheelFacts, metadata: bytes) -> CachedWheel:
        """Move a checked wheel (on the same disk) into the cache with its metadata and
        facts; the wheel's name appears last."""
        final = self._inside("wheels", commit, wheel.name)
        final.parent.mkdir(parents=True, exist_ok=True)
        for suffix, content in ((".metadata", metadata),
                                (".json", json.dumps(facts.to_json()).encode())):
            temp = wheel.with_name(wheel.name + suffix)
            temp.write_bytes(content)
            temp.chmod(0o644)
            os.replace(temp, final.with_name(final.name + suffix))
        wheel.chmod(0o644)
        os.replace(wheel, final)
        with self._facts_lock:
            self._facts[(commit, wheel.name)] = facts
        return CachedWheel(final, facts)

    def touch(self, cached: CachedWheel) -> None:
        """Mark a wheel as just used (the eviction order). The time is given, not left
        to the file system: its own clock ticks in milliseconds, and two uses within
        one tick would tie."""
        now = time.time_ns()
        with contextlib.suppress(OSError):
            os.utime(cached.path, ns=(now, now))

    # -- size ----------------------------------------------------------------------------
    def _entries(self) -> list[tuple[int, int, Path]]:
        """(last use, bytes with metadata and facts, wheel path) of every cached wheel."""
        entries = []
        for commit in _scandir(self.wheels):
            # Only real folders named as commits: a planted link is never followed (the
            # eviction would delete what it leads to).
            if not _is_commit_folder(commit):
                continue
            for entry in _scandir(Path(commit.path)):
                if not entry.name.endswith(".whl") or entry.is_symlink():
                    continue
                try:
                    stat = entry.stat()
                except OSError:
                    continue  # evicted by another process meanwhile
                size = stat.st_size
                for extra in _EXTRAS:
                    with contextlib.suppress(OSError):
                        size += os.stat(entry.path + extra).st_size
                entries.append((stat.st_mtime_ns, size, Path(entry.path)))
        return entries

    def usage(self) -> CacheUsage:
        entries = self._entries()
        return CacheUsage(len(entries), sum(size for _, size, _ in entries), self.limit)

    def evict(self) -> list[str]:
        """Remove least recently used wheels until the cache fits its limit. One
        process evicts at a time; the others skip (the next wheel placed tries again)."""
        removed: list[str] = []
        lock_path = self.locks / "evict.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return removed
            entries = sorted(self._entries())
            total = sum(size for _, size, _ in entries)
            for _used, size, path in entries:
                if total <= self.limit:
                    break
                for victim in (path, *(path.with_name(path.name + extra) for extra in _EXTRAS)):
                    with contextlib.suppress(FileNotFoundError):
                        victim.unlink()  # the wheel first: without it the entry is gone
                total -= size
                removed.append(path.name)
                self.events.write("evicted", wheel=path.name, commit=path.parent.name,
                                  bytes=size, cache_bytes=total, limit=self.limit)
        finally:
            os.close(fd)
        return removed

    def writable(self) -> bool:
        """Whether a file can be created in the cache (the health check)."""
        probe = self.staging / f".health-{os.getpid()}-{threading.get_ident()}"
        try:
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError:
            return False
        return True


def _is_commit_folder(entry: os.DirEntry[str]) -> bool:
    try:
        commit_id(entry.name, "serve cache")
        return entry.is_dir(follow_symlinks=False)
    except (OSError, UnsafeNameError):
        return False


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
