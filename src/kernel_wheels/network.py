"""Network settings: every remote call has a connect and a read timeout, and is retried
with exponential backoff (honouring a server's Retry-After) before it fails with one line.

A peer that trickles (one byte a second never trips a read timeout) is a stall too: a
transfer averaging less than ``MIN_RATE`` bytes per second over a window of ``--timeout``
seconds is ended and tried again like a timeout, so one try of a call lasts at most about
twice the timeout, however slowly the peer sends. (How huggingface_hub's client is given
these, and the Hub's credentials only to the Hub's origin: :mod:`kernel_wheels.hub.session`.)

``KERNEL_WHEELS_TIMEOUT`` (seconds, default 30) bounds the Hub API calls and git
transfers; file downloads use huggingface_hub's own ``HF_HUB_DOWNLOAD_TIMEOUT`` and
``HF_HUB_ETAG_TIMEOUT`` (default 10). ``KERNEL_WHEELS_RETRIES`` (default 3) is how many
times a failed call is tried again. ``--timeout`` and ``--retries`` override both.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from .errors import UsageError

DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 3
#: A server asking to wait longer than this (429 Retry-After) gets an error instead.
MAX_RETRY_AFTER = 120.0
#: The longest wait between two tries, and the most tries again a user may ask for.
MAX_BACKOFF = 60.0
MAX_RETRIES = 100
#: Bytes per second below which a transfer is a stall (averaged over a --timeout window;
#: git's GIT_HTTP_LOW_SPEED_LIMIT, which the git source sets to the same value).
MIN_RATE = 1000
#: The longest timeout accepted: a day. Beyond it (``1e308``) the socket layer cannot
#: even hold the value (OverflowError at the first connection).
MAX_TIMEOUT = 86400.0


class TransferTooSlow(TimeoutError):
    """A peer sent less than ``MIN_RATE`` bytes per second for a whole timeout window."""


@dataclass(frozen=True)
class NetworkSettings:
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    #: First backoff delay in seconds; doubled on every retry.
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.timeout < math.inf:  # also refuses nan
            raise UsageError(f"--timeout {self.timeout}: give a finite number of seconds above 0")
        if self.timeout > MAX_TIMEOUT:
            raise UsageError(f"--timeout {self.timeout:g}: give at most {MAX_TIMEOUT:g} seconds (a day)")
        if not 0 <= self.retries <= MAX_RETRIES:
            raise UsageError(f"--retries {self.retries}: give 0 to {MAX_RETRIES}")

    @classmethod
    def from_environment(cls, timeout: float | None = None,
                         retries: int | None = None) -> NetworkSettings:
        return cls(timeout if timeout is not None else _env_number("KERNEL_WHEELS_TIMEOUT",
                                                                   DEFAULT_TIMEOUT, float),
                   retries if retries is not None else int(_env_number("KERNEL_WHEELS_RETRIES",
                                                                       DEFAULT_RETRIES, int)))

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before try ``attempt + 1``."""
        if retry_after is not None:
            return retry_after
        return float(min(self.backoff * 2 ** min(attempt - 1, 16), MAX_BACKOFF))


def _env_number(name: str, default: float, kind: type[float] | type[int]) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        return kind(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not a number") from None


def retry_after_seconds(headers: object) -> float | None:
    """A 429/503 answer's Retry-After (seconds form), if any."""
    get = getattr(headers, "get", None)
    value = get("Retry-After") if callable(get) else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def rate_guard(window: float, min_rate: int = MIN_RATE) -> Any:
    """An httpx response hook that ends a body arriving slower than ``min_rate`` bytes per
    second over ``window`` seconds with :class:`TransferTooSlow` (like a read timeout)."""

    def guard(response: Any) -> None:
        response.stream = _guarded_stream_class()(response.stream, window, min_rate,
                                                  str(response.request.url))

    return guard


@cache
def _guarded_stream_class() -> Any:
    """Made on first use: the HTTP stack is imported only by runs that use the network."""
    import httpx2

    class RateGuardedStream(httpx2.SyncByteStream):
        def __init__(self, inner: httpx2.SyncByteStream, window: float, min_rate: int,
                     url: str) -> None:
            self.inner, self.window, self.min_bytes = inner, window, window * min_rate
            self.host = urlsplit(url).hostname or "the server"

        def __iter__(self) -> Any:
            started, received = time.monotonic(), 0
            for chunk in self.inner:
                received += len(chunk)
                now = time.monotonic()
                if now - started >= self.window:
                    if received < self.min_bytes:
                        raise TransferTooSlow(
                            f"{self.host} sent {received} bytes in {now - started:.1f} s, slower "
                            f"than {MIN_RATE} bytes/s")
                    started, received = now, 0
                yield chunk

        def close(self) -> None:
            self.inner.close()

    return RateGuardedStream
