"""The wheel cache on disk: converted wheels by commit, bounded in size.

Layout (``CACHE`` is ``--cache``)::

    CACHE/wheels/<commit>/<wheel>            the wheel; its presence means "complete"
    CACHE/wheels/<commit>/<wheel>.metadata   its METADATA (the PEP 658 file)
    CACHE/wheels/<commit>/<wheel>.json       its facts: sha256, size, metadata sha256
    CACHE/locks/<commit>/<wheel>.lock        held while the wheel is being made
    CACHE/listings/<org>--<name>.json        the last Hub listing of each kernel
    CACHE/staging/                           conversions in progress (removed if abandoned)

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
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..distribution.atomic import SiteLock
from ..distribution.wheelfacts import WheelFacts
from .logs import EventLog


@dataclass(frozen=True)
class CachedWheel:
    path: Path
    facts: WheelFacts

    @property
    def metadata_path(self) -> Path:
        return self.path.with_name(self.path.name + ".metadata")


@dataclass(frozen=True)
class CacheUsage:
    wheels: int
    bytes: int
    limit: int


def _facts_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".json")


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
        return self.wheels / commit / filename

    def known_facts(self, commit: str, filename: str) -> WheelFacts | None:
        """The facts of a wheel converted once (by any process), without opening it.
        They stay true after an eviction: the same commit converts to the same bytes."""
        key = (commit, filename)
        if (facts := self._facts.get(key)) is not None:
            return facts
        try:
            row = json.loads(_facts_path(self.path(commit, filename)).read_text())
            facts = WheelFacts.from_json(filename, row)
        except (OSError, ValueError, TypeError, AssertionError):
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
    def making(self, commit: str, filename: str) -> Iterator[None]:
        """Held while a wheel is made: others wanting it wait, then find it cached."""
        with SiteLock(self.locks / commit / f"{filename}.lock"):
            yield

    def place(self, commit: str, wheel: Path, facts: WheelFacts, metadata: bytes) -> CachedWheel:
        """Move a checked wheel (on the same disk) into the cache with its metadata and
        facts; the wheel's name appears last."""
        final = self.path(commit, wheel.name)
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
            for entry in _scandir(Path(commit.path)):
                if not entry.name.endswith(".whl"):
                    continue
                try:
                    stat = entry.stat()
                except OSError:
                    continue  # evicted by another process meanwhile
                size = stat.st_size
                for extra in (".metadata", ".json"):
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
                for victim in (path, path.with_name(path.name + ".metadata"), _facts_path(path)):
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


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
