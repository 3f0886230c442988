"""A listed wheel on its first request: convert its one variant, check it, cache it.

The conversion is ``to-wheel REPO X.Y.Z --variant V --dist-name PROJECT`` with default
options (:func:`kernel_wheels.convert.pipeline.to_wheels`, checks included), so a wheel's bytes
are the same on every replica and equal to what ``to-wheel`` gives a user (the
distribution name is the repository's, which is also the kernel's name unless its
metadata.json says otherwise). The first request for a wheel converts it while holding
the wheel's lock; requests arriving meanwhile, in this process or another worker, wait
for that lock and then find it cached. The wheel is served from the cache from then on,
byte for byte.

A failure is a :class:`~kernel_wheels.errors.WheelUnavailableError` with one line
saying why: the Hub's (HTTP 502: unreachable, not found) or ours (HTTP 500: the
conversion or a check failed). Nothing is cached then, and no partial file is ever
served: a conversion works in a staging folder that is removed afterwards, or on the
next start if the process died. A failure that would happen again (a check) is
remembered for a while so that clients retrying do not convert again and again.
"""

from __future__ import annotations

import threading
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

from ..convert.output import OutputFolder
from ..convert.pipeline import ConvertOptions, to_wheels
from ..distribution.wheelfacts import read_facts
from ..errors import KernelWheelsError, SourceError, WheelUnavailableError
from ..kernel.selection import VariantFilter
from ..kernel.versions import RequestKind, VersionRequest
from ..sources import KernelSource
from .cache import CachedWheel, WheelCache
from .catalog import Catalog, ServedWheel
from .logs import EventLog

#: Attempts to open a wheel that an eviction by another worker removes in between.
_OPEN_ATTEMPTS = 3


@dataclass(frozen=True)
class OpenedFile:
    """A cached file opened for sending, with what the response headers need."""

    stream: BinaryIO
    size: int
    sha256: str


class Conversions:
    def __init__(self, cache: WheelCache, catalog: Catalog, sources: Mapping[str, KernelSource],
                 events: EventLog, failure_ttl: float) -> None:
        self.cache, self.catalog, self.sources = cache, catalog, sources
        self.events, self.failure_ttl = events, failure_ttl
        self._failures: dict[tuple[str, str], tuple[float, str]] = {}
        self._failures_lock = threading.Lock()

    def open(self, wheel: ServedWheel, metadata: bool = False) -> OpenedFile:
        """The wheel (or its ``.metadata`` file), converted first if it is not cached.
        Blocks for the length of a conversion: call it from a thread."""
        for _attempt in range(_OPEN_ATTEMPTS):
            cached, made = self._ensure(wheel)
            path = cached.metadata_path if metadata else cached.path
            try:
                stream = path.open("rb")
            except FileNotFoundError:
                continue  # evicted by another worker in between: make it again
            self.cache.touch(cached)
            if made:  # after opening: what is being sent survives its eviction
                self.cache.evict()
            sha256 = cached.facts.metadata_sha256 if metadata else cached.facts.sha256
            size = cached.facts.size if not metadata else path.stat().st_size
            return OpenedFile(stream, size, sha256)
        raise WheelUnavailableError(f"{wheel.filename} was evicted again and again while being "
                                    "sent: --cache-size is too small for this load",
                                    upstream=False)

    def _ensure(self, wheel: ServedWheel) -> tuple[CachedWheel, bool]:
        """(the cached wheel, whether this call made it)."""
        if (cached := self.cache.lookup(wheel.commit, wheel.filename)) is not None:
            return cached, False
        self._raise_remembered_failure(wheel)
        with self.cache.making(wheel.commit, wheel.filename):
            # Whoever held the lock before us may have made it.
            if (cached := self.cache.lookup(wheel.commit, wheel.filename)) is not None:
                return cached, False
            self._raise_remembered_failure(wheel)
            return self._convert(wheel), True

    def _raise_remembered_failure(self, wheel: ServedWheel) -> None:
        with self._failures_lock:
            until, message = self._failures.get((wheel.commit, wheel.filename), (0.0, ""))
        if time.monotonic() < until:
            raise WheelUnavailableError(message, upstream=False)

    def _convert(self, wheel: ServedWheel) -> CachedWheel:
        started = time.perf_counter()
        self.events.write("conversion-started", wheel=wheel.filename, repo=wheel.kernel.repo_id,
                          tag=wheel.tag, commit=wheel.commit, variant=wheel.variant)

        def note(message: str) -> None:
            self.events.write("conversion-note", wheel=wheel.filename, message=message)

        try:
            with OutputFolder(self.cache.staging).staging() as work:
                source = self.sources[wheel.kernel.repo_id]
                options = ConvertOptions(output_dir=work, jobs=1, dist_name=wheel.kernel.project,
                                         filters=VariantFilter(patterns=(wheel.variant,)))
                result = to_wheels(source, VersionRequest(RequestKind.EXACT, wheel.version),
                                   options, note)
                made = [w.path for w in result.wheels]
                if [p.name for p in made] != [wheel.filename]:
                    raise WheelUnavailableError(
                        f"converting build/{wheel.variant} of {wheel.kernel.repo_id} {wheel.tag} "
                        f"gave {', '.join(p.name for p in made) or 'no wheel'}, not the listed "
                        f"{wheel.filename}", upstream=False)
                commit = result.revision.commit or wheel.commit
                if commit != wheel.commit:  # the tag moved since the listing
                    note(f"{wheel.tag} now points at {commit}, not {wheel.commit}")
                    self.catalog.forget(wheel.kernel)
                facts, metadata = read_facts(made[0])
                cached = self.cache.place(commit, made[0], facts, metadata)
        except WheelUnavailableError as exc:
            self._failed(wheel, exc.message, started, remember=not exc.upstream)
            raise
        except SourceError as exc:  # the Hub: unreachable, not found, refused
            message = f"cannot make {wheel.filename}: {exc.message}"
            self._failed(wheel, message, started, remember=False)
            raise WheelUnavailableError(message, upstream=True) from None
        except KernelWheelsError as exc:  # the conversion or a check
            message = f"cannot make {wheel.filename}: {exc.message.splitlines()[0]}"
            self._failed(wheel, message, started, remember=True)
            raise WheelUnavailableError(message, upstream=False) from None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            text = str(exc)
            reason = getattr(exc, "strerror", None) or \
                (text.splitlines()[0] if text else type(exc).__name__)
            message = f"cannot make {wheel.filename}: {reason}"
            self._failed(wheel, message, started, remember=False)
            raise WheelUnavailableError(message, upstream=False) from None
        self.events.write("converted", wheel=wheel.filename, commit=commit, sha256=facts.sha256,
                          bytes=facts.size, seconds=round(time.perf_counter() - started, 3))
        return cached

    def _failed(self, wheel: ServedWheel, message: str, started: float, remember: bool) -> None:
        self.events.write("conversion-failed", wheel=wheel.filename, reason=message,
                          seconds=round(time.perf_counter() - started, 3))
        if remember and self.failure_ttl > 0:
            with self._failures_lock:
                self._failures[(wheel.commit, wheel.filename)] = \
                    (time.monotonic() + self.failure_ttl, message)
