"""One run at a time folds records into the state and writes pages: a lease object.

``.kernel-wheels/mirror/lease`` is written with a conditional put (there is none, or
nothing is written), so two runs can never both hold it. It names its holder (host, pid,
a random token) and when it expires. A run finds it stale, and takes it over, when the
holder is a process of this host that is gone (a killed run, found at once) or when it
expired (a holder on another machine, after ``ttl`` seconds). Converting and uploading
wheels needs no lease: every object is a pure function of its key.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from types import TracebackType

from ..errors import DistributionError
from .store import Destination

LEASE_KEY = ".kernel-wheels/mirror/lease"
DEFAULT_TTL = 900.0


class LeaseBusyError(DistributionError):
    """Another run holds the lease, and still did after waiting."""


def _alive_here(holder: dict[str, object]) -> bool | None:
    """Whether the holder's process lives; None when it is on another host."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return None
    try:
        os.kill(int(holder["pid"]), 0)  # type: ignore[call-overload]
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    def __init__(self, store: Destination, *, ttl: float = DEFAULT_TTL, wait: float = 600.0,
                 clock: Callable[[], float] = time.time, on_wait: Callable[[str], None] = lambda _: None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.store, self.ttl, self.wait = store, ttl, wait
        self.clock, self.on_wait, self.sleep = clock, on_wait, sleep
        self.token = secrets.token_hex(8)

    def _body(self) -> bytes:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                           "expires": self.clock() + self.ttl}).encode()

    def _stale(self, raw: bytes) -> bool:
        try:
            holder = json.loads(raw)
            expires = float(holder["expires"])
        except (ValueError, KeyError, TypeError):
            return True  # not a lease any run wrote (a torn folder write cannot happen)
        alive = _alive_here(holder)
        return alive is False or (alive is None and self.clock() > expires)

    def __enter__(self) -> Lease:
        deadline = self.clock() + self.wait
        told = False
        delay = 0.05
        while not self.store.put(LEASE_KEY, self._body(), if_absent=True):
            raw = self.store.get(LEASE_KEY)
            if raw is not None and self._stale(raw):
                self.on_wait(f"{self.store.description}: taking over a lease its holder left")
                self.store.delete(LEASE_KEY)
                continue
            if self.clock() > deadline:
                raise LeaseBusyError(f"{self.store.description}: another mirror run holds the lease "
                                     f"({LEASE_KEY}) for more than {self.wait:.0f} s")
            if not told:
                self.on_wait(f"{self.store.description}: waiting for another mirror run to finish")
                told = True
            self.sleep(delay)
            delay = min(delay * 2, 2.0)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        raw = self.store.get(LEASE_KEY)
        if raw is not None and json.loads(raw).get("token") == self.token:
            self.store.delete(LEASE_KEY)
