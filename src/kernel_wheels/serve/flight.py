"""Work that waits on the Hub, done once per key, in a bounded pool of its own, while the
requests that need it wait without holding a thread.

Why this exists: a request that waited for a conversion inside a worker thread held that
thread for as long as the Hub took. anyio lends request handlers 40 threads; 45 requests
for one wheel of a stalling Hub took them all, and a cached wheel of another kernel then
waited two minutes for a thread. Here the work runs in an executor of its own (the
conversion pool, the listing pool), and every request that wants its result awaits one
shared future on the event loop: a thousand waiters cost a thousand small objects, no
thread. The threads that send pages and cached files are never lent to the Hub.

:class:`FailureMemory` keeps a failure for a back-off window, so that the clients (and
their retries) arriving after one failed attempt get its answer at once instead of
starting another attempt each.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """At most one run of the work for a key at a time in this process; every caller
    awaits the same result. The work runs in ``executor``; a caller that goes away (a
    client that disconnects) does not cancel it, since others may be waiting too."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._running: dict[K, asyncio.Future[V]] = {}

    def running(self) -> int:
        return len(self._running)

    def is_running(self, key: K) -> bool:
        return key in self._running

    def start(self, key: K, work: Callable[[], V]) -> asyncio.Future[V]:
        """The future of the run for ``key``: the one already running, or a new one."""
        future = self._running.get(key)
        if future is None:
            future = asyncio.wrap_future(self.executor.submit(work))
            self._running[key] = future
            future.add_done_callback(lambda done: self._finished(key, done))
        return future

    async def run(self, key: K, work: Callable[[], V]) -> V:
        return await asyncio.shield(self.start(key, work))

    def _finished(self, key: K, future: asyncio.Future[V]) -> None:
        if self._running.get(key) is future:
            del self._running[key]
        if not future.cancelled():
            future.exception()  # retrieved: every waiter may have gone away


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, and until when (``time.monotonic``) it is not tried again."""

    message: str
    upstream: bool
    until: float


class FailureMemory(Generic[K]):
    """Failures by key for their back-off window; at most ``limit`` of them (the oldest
    are forgotten first), so a client asking for ever new names cannot grow it."""

    def __init__(self, limit: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.clock = limit, clock
        self._failures: OrderedDict[K, Failure] = OrderedDict()
        self._lock = threading.Lock()  # the event loop reads, conversion threads write

    def remember(self, key: K, message: str, upstream: bool, seconds: float) -> Failure:
        failure = Failure(message, upstream, self.clock() + seconds)
        with self._lock:
            self._failures.pop(key, None)
            self._failures[key] = failure
            while len(self._failures) > self.limit:
                self._failures.popitem(last=False)
        return failure

    def recall(self, key: K) -> Failure | None:
        with self._lock:
            failure = self._failures.get(key)
            if failure is not None and self.clock() >= failure.until:
                del self._failures[key]
                return None
            return failure

    def forget(self, key: K) -> None:
        with self._lock:
            self._failures.pop(key, None)
