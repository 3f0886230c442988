"""A listed wheel on its first request: convert its one variant, check it, cache it.

The conversion is ``to-wheel REPO X.Y.Z --variant V --dist-name PROJECT`` with default
options (:func:`kernel_wheels.convert.pipeline.to_wheels`, checks included), so a wheel's bytes
are the same on every replica and equal to what ``to-wheel`` gives a user (the
distribution name is the repository's, which is also the kernel's name unless its
metadata.json says otherwise). A macOS build is listed before its binaries are read, at
the version kernel-builder builds its backend for, and converted with that
``--macos-version``: binaries that need less are tagged with it all the same (``to-wheel``
alone would tag them lower), binaries that need more fail their check.

Waiting costs no thread. Conversions run in a bounded pool of their own (``--conversions``
threads per worker process); the requests that want a wheel being made await one shared
future on the event loop (:class:`~kernel_wheels.serve.flight.SingleFlight`), so a Hub that
stalls holds conversion threads only, never the threads that send pages and cached
files. One attempt per wheel at a time: in this process by the single flight, across
``--workers`` processes by the wheel's lock file, which only the conversion thread takes
(a second process's conversion waits for it there, then finds the wheel cached, or the
failure recorded).

A failure is a :class:`~kernel_wheels.errors.WheelUnavailableError` with one line
saying why: the Hub's (HTTP 502: unreachable, not found, a hostile answer) or ours (HTTP
500: the conversion or a check failed). Nothing is cached then, and no partial file is
ever served: a conversion works in a staging folder that is removed afterwards, or on the
next start if the process died. Every failure is remembered for a back-off window (a
check failure for ``failure_ttl``, a Hub failure for ``hub_backoff``), in this process and
in the lock folder for the others, so that the requests and retries arriving meanwhile
get its answer at once and cause no new attempt. A wheel whose version two tags spell is
refused before any conversion, and so is one the catalog knows the policy refuses.

Every file served passes the server's policy, cached or not (docs/provenance.md): a
conversion runs under it; a wheel found in the cache that this policy has not judged (one
cached under another policy, by an earlier run) is judged by the one verdict
(:func:`kernel_wheels.checks.verdict.judge_wheel`) before it is listed or sent, once, the
verdict kept beside it; and a conversion the policy refused is kept as a verdict too, so
that no page lists that file afterwards. (A refusal for the publisher's trust is not kept:
the Hub's answer may change; the catalog asks it on every refresh.)
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO, TypeVar

from starlette.concurrency import run_in_threadpool

from ..confine import commit_id
from ..convert.output import OutputFolder
from ..convert.pipeline import ConvertOptions, to_wheels
from ..errors import (
    AmbiguousVersionError,
    KernelWheelsError,
    NetworkError,
    ProvenanceError,
    SourceError,
    UnsafeNameError,
    UntrustedPublisherError,
    WheelUnavailableError,
)
from ..hub.failures import unusable
from ..index.wheelfacts import read_facts
from ..kernel.revision import Revision
from ..kernel.selection import VariantFilter
from ..kernel.variants import parse_variant
from ..kernel.versions import RequestKind, VersionRequest
from ..provenance import Policy
from ..sources import FetchedVariant, KernelSource
from ..wheel.plan import TagOptions, macos_version_for
from .cache import CachedWheel, StoredFailure, Verdict, WheelCache
from .catalog import Catalog, ServedWheel
from .flight import FailureMemory, SingleFlight
from .logs import EventLog

#: Attempts to open a wheel that an eviction by another worker removes in between.
_OPEN_ATTEMPTS = 3

WheelKey = tuple[str, str]  # (commit, file name)
T = TypeVar("T")


@dataclass(frozen=True)
class OpenedFile:
    """A cached file opened for sending, with what the response headers need."""

    stream: BinaryIO
    size: int
    sha256: str


@dataclass(frozen=True)
class BackOff:
    """How long a failure is remembered before the wheel is tried again (seconds)."""

    ours: float = 60.0  # a check or conversion failure: it would fail again
    hub: float = 30.0  # the Hub's: it may be back soon, but not at once for every client


class CheckedSource:
    """A Hub source as serve hands it to ``to_wheels``: the commit it resolves to is
    checked before anything is fetched (it names folders of the HF cache and of the
    wheel cache), and an answer it cannot read (HTML, garbage, a wrong shape) is a Hub
    failure with one line, not an exception of some other kind."""

    def __init__(self, source: KernelSource, repo_id: str) -> None:
        self.source, self.repo_id = source, repo_id
        self.name, self.display = source.name, source.display
        self.fetch_downloads = source.fetch_downloads

    def resolve(self, request: VersionRequest | None) -> Revision:
        revision = self._asked("resolving the version", partial(self.source.resolve, request))
        commit_id(revision.commit, f"{self.repo_id}: the Hub's refs")
        return revision

    def variant_names(self, revision: Revision) -> list[str]:
        return self._asked("listing build/", partial(self.source.variant_names, revision))

    def fetch(self, revision: Revision, names: list[str],
              workdir: Path) -> Iterator[tuple[str, FetchedVariant]]:
        fetched = self._asked("downloading", lambda: iter(self.source.fetch(revision, names, workdir)))
        try:
            while True:
                item = self._asked("downloading", lambda: next(fetched, None))
                if item is None:
                    return
                yield item
        finally:  # its own clean-up (stop the transfers) now, not when it is collected
            close = getattr(fetched, "close", None)
            if close is not None:
                close()

    def card(self, revision: Revision) -> str | None:
        return self._asked("reading the card", partial(self.source.card, revision))

    def publisher_trust(self) -> tuple[str | None, bool | None]:
        """The Hub source's answer (docs/provenance.md), as to-wheel records it: the same
        bytes from serve and to-wheel."""
        ask = getattr(self.source, "publisher_trust", None)
        return ask() if ask is not None else (None, None)

    def _asked(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except KernelWheelsError:
            raise
        except Exception as exc:  # what a hostile answer provokes in the Hub client
            raise NetworkError(f"{what} of {self.repo_id}: the Hub sent an answer that cannot "
                               f"be used ({unusable(exc)})") from None


class Conversions:
    def __init__(self, cache: WheelCache, catalog: Catalog, sources: Mapping[str, KernelSource],
                 events: EventLog, flights: SingleFlight[WheelKey, CachedWheel],
                 backoff: BackOff, policy: Policy | None = None) -> None:
        self.cache, self.catalog = cache, catalog
        #: What each conversion's provenance must prove (docs/provenance.md).
        self.policy = policy or Policy()
        self.sources = {repo: CheckedSource(source, repo) for repo, source in sources.items()}
        self.events, self.flights, self.backoff = events, flights, backoff
        self.failures: FailureMemory[WheelKey] = FailureMemory()
        #: Requests now awaiting a conversion (on the event loop: no lock needed).
        self.waiting = 0
        self.policy_key = self.policy.fingerprint()
        #: Why the policy refuses each wheel judged so far (None: it passes).
        self.verdicts: dict[WheelKey, str | None] = {}

    # -- what the policy admits --------------------------------------------------------
    def _known_verdict(self, wheel: ServedWheel) -> tuple[bool, str | None]:
        """(whether the policy's verdict on the wheel is known, why it refuses it),
        without judging: the catalog's refusal, one remembered or recorded in the cache,
        or none for a wheel not made yet (its conversion runs under the policy)."""
        if wheel.refused is not None:
            return True, wheel.refused
        key = (wheel.commit, wheel.filename)
        if key in self.verdicts:
            return True, self.verdicts[key]
        recorded = self.cache.verdict(*key)
        if recorded is not None and recorded.policy == self.policy_key:
            self.verdicts[key] = recorded.refusal
            return True, recorded.refusal
        return self.cache.lookup(*key) is None, None

    def refusal(self, wheel: ServedWheel) -> str | None:
        """Why the policy refuses the wheel (None: it may be listed and sent); a cached
        wheel this policy has not judged yet is judged now (blocks: call it in a thread)."""
        known, refusal = self._known_verdict(wheel)
        if known:
            return refusal
        cached = self.cache.lookup(wheel.commit, wheel.filename)
        if cached is None:  # evicted meanwhile: converted again under the policy
            return None
        from ..checks.verdict import judge_wheel

        report = judge_wheel(cached.path, policy=self.policy)
        refusal = None if report.passed else \
            f"{wheel.filename} (cached) fails under this server's policy: {report.first_failure()}"
        self._keep(wheel, refusal)
        if refusal is not None:
            self.events.write("cached-refused", wheel=wheel.filename, reason=refusal)
        return refusal

    async def admitted(self, wheels: Sequence[ServedWheel]) -> list[ServedWheel]:
        """The wheels the policy admits, for a page: cached wheels not judged yet are
        judged in a worker thread (once: the verdict is kept), the rest on the event loop
        from what is known."""
        unjudged = [w for w in wheels if not self._known_verdict(w)[0]]
        if unjudged:
            await run_in_threadpool(lambda: [self.refusal(w) for w in unjudged])
        return [w for w in wheels if self._known_verdict(w)[1] is None]

    def _keep(self, wheel: ServedWheel, refusal: str | None) -> None:
        self.verdicts[(wheel.commit, wheel.filename)] = refusal
        self.cache.record_verdict(wheel.commit, wheel.filename, Verdict(self.policy_key, refusal))

    async def open(self, wheel: ServedWheel, metadata: bool = False) -> OpenedFile:
        """The wheel (or its ``.metadata`` file), converted first if it is not cached.
        A cached file is opened in a worker thread (a moment); a conversion is awaited
        without one."""
        if wheel.ambiguity is not None:
            raise AmbiguousVersionError(wheel.ambiguity)
        if wheel.refused is not None:
            raise WheelUnavailableError(wheel.refused, upstream=False)
        key = (wheel.commit, wheel.filename)
        for _attempt in range(_OPEN_ATTEMPTS):
            opened = await run_in_threadpool(self._open_cached, wheel, metadata)
            if opened is not None:
                return opened
            self._raise_remembered_failure(key)
            self.waiting += 1
            try:
                cached = await self.flights.run(key, partial(self._make, wheel))
            finally:
                self.waiting -= 1
            opened = await run_in_threadpool(self._open, cached, metadata)
            if opened is not None:
                return opened
        raise WheelUnavailableError(f"{wheel.filename} was evicted again and again while being "
                                    "sent: --cache-size is too small for this load",
                                    upstream=False)

    def _open_cached(self, wheel: ServedWheel, metadata: bool) -> OpenedFile | None:
        """The cached file opened, if the policy admits it (judged first, if it was cached
        under another policy); a refusal is the policy's reason."""
        if (refusal := self.refusal(wheel)) is not None:
            raise WheelUnavailableError(refusal, upstream=False)
        cached = self.cache.lookup(wheel.commit, wheel.filename)
        return self._open(cached, metadata) if cached is not None else None

    def _open(self, cached: CachedWheel, metadata: bool) -> OpenedFile | None:
        """The file opened, or None if an eviction removed it meanwhile."""
        path = cached.metadata_path if metadata else cached.path
        try:
            stream = path.open("rb")
        except FileNotFoundError:
            return None
        self.cache.touch(cached)
        sha256 = cached.facts.metadata_sha256 if metadata else cached.facts.sha256
        size = cached.facts.size if not metadata else path.stat().st_size
        return OpenedFile(stream, size, sha256)

    def _raise_remembered_failure(self, key: WheelKey) -> None:
        if (failure := self.failures.recall(key)) is not None:
            raise WheelUnavailableError(failure.message, upstream=failure.upstream)

    # -- in the conversion pool ------------------------------------------------------
    def _make(self, wheel: ServedWheel) -> CachedWheel:
        """The wheel, made unless another process made it (or just failed to) while
        this one waited for its lock."""
        try:
            def waits(message: str) -> None:  # another worker process is making it
                self.events.write("conversion-waits", wheel=wheel.filename, message=message)

            with self.cache.making(wheel.commit, wheel.filename, waits):
                if (cached := self.cache.lookup(wheel.commit, wheel.filename)) is not None:
                    return cached
                recorded = self.cache.recorded_failure(wheel.commit, wheel.filename)
                if recorded is not None:
                    self.failures.remember((wheel.commit, wheel.filename), recorded.message,
                                           recorded.upstream, recorded.until - time.time())
                    raise WheelUnavailableError(recorded.message, upstream=recorded.upstream)
                try:
                    cached = self._convert(wheel)
                except WheelUnavailableError as exc:
                    self._remember(wheel, exc)
                    raise
                self.cache.clear_failure(wheel.commit, wheel.filename)
        except UnsafeNameError as exc:  # a name from the Hub that would lead out of the cache
            self.events.write("name-refused", wheel=wheel.filename, reason=exc.message)
            raise WheelUnavailableError(f"cannot make {wheel.filename}: {exc.message}",
                                        upstream=True) from None
        self.cache.evict()  # the new wheel was used last: the least recent go first
        return cached

    def _remember(self, wheel: ServedWheel, exc: WheelUnavailableError) -> None:
        seconds = self.backoff.hub if exc.upstream else self.backoff.ours
        if seconds <= 0:
            return
        self.failures.remember((wheel.commit, wheel.filename), exc.message, exc.upstream, seconds)
        self.cache.record_failure(wheel.commit, wheel.filename,
                                  StoredFailure(exc.message, exc.upstream, time.time() + seconds))

    def _convert(self, wheel: ServedWheel) -> CachedWheel:
        started = time.perf_counter()
        self.events.write("conversion-started", wheel=wheel.filename, repo=wheel.kernel.repo_id,
                          tag=wheel.tag, commit=wheel.commit, variant=wheel.variant)

        def note(message: str) -> None:
            self.events.write("conversion-note", wheel=wheel.filename, message=message)

        try:
            with OutputFolder(self.cache.staging).staging() as work:
                source = self.sources[wheel.kernel.repo_id]
                # A macOS build is made at the version the catalog listed it under (its
                # backend's, --macos-version auto's guess before the binaries are read).
                tags = TagOptions(macos_version=macos_version_for(parse_variant(wheel.variant)))
                options = ConvertOptions(output_dir=work, jobs=1, dist_name=wheel.kernel.project,
                                         filters=VariantFilter(patterns=(wheel.variant,)),
                                         policy=self.policy, tags=tags)
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
                # ``commit`` is the Hub's word again: place() checks it before any write.
                cached = self.cache.place(commit, made[0], facts, metadata)
                if commit == wheel.commit:  # made under this policy: it passes it
                    self._keep(wheel, None)
        except WheelUnavailableError as exc:
            self._failed(wheel, exc.message, started)
            raise
        except SourceError as exc:  # the Hub: unreachable, not found, refused, a hostile name
            if isinstance(exc, UnsafeNameError):
                self.events.write("name-refused", wheel=wheel.filename, reason=exc.message)
            message = f"cannot make {wheel.filename}: {exc.message}"
            self._failed(wheel, message, started)
            raise WheelUnavailableError(message, upstream=True) from None
        except ProvenanceError as exc:  # the policy refuses the build: for good at this commit
            message = f"cannot make {wheel.filename}: {exc.message.splitlines()[0]}"
            self._failed(wheel, message, started)
            if not isinstance(exc, UntrustedPublisherError):  # the Hub's answer may change
                self._keep(wheel, message)
            raise WheelUnavailableError(message, upstream=False) from None
        except KernelWheelsError as exc:  # the conversion or a check
            message = f"cannot make {wheel.filename}: {exc.message.splitlines()[0]}"
            self._failed(wheel, message, started)
            raise WheelUnavailableError(message, upstream=False) from None
        except (OSError, zipfile.BadZipFile) as exc:
            text = str(exc)
            reason = getattr(exc, "strerror", None) or \
                (text.splitlines()[0] if text else type(exc).__name__)
            message = f"cannot make {wheel.filename}: {reason}"
            self._failed(wheel, message, started)
            raise WheelUnavailableError(message, upstream=False) from None
        except Exception as exc:  # a bug of ours: still one line, and logged
            message = f"cannot make {wheel.filename}: {unusable(exc)}"
            self._failed(wheel, message, started)
            raise WheelUnavailableError(message, upstream=False) from None
        self.events.write("converted", wheel=wheel.filename, commit=commit, sha256=facts.sha256,
                          bytes=facts.size, seconds=round(time.perf_counter() - started, 3))
        return cached

    def _failed(self, wheel: ServedWheel, message: str, started: float) -> None:
        self.events.write("conversion-failed", wheel=wheel.filename, reason=message,
                          seconds=round(time.perf_counter() - started, 3))
