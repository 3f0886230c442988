"""One run at a time folds records into the state and writes pages: a lease object.

``.kernel-wheels/mirror/lease`` is written with a conditional put (there is none, or
nothing is written), so two runs can never both create it. It names its holder (host,
pid, a random token) and when it expires. A run finds it stale when the holder is a
process of this host that is gone (a killed run, found at once) or when it expired (a
holder on another machine, after ``ttl`` seconds). Converting and uploading wheels needs
no lease: every object is a pure function of its key.

Taking a stale lease over is a read, a delete and a put, and neither store has a delete
that is conditional on what was read. So the delete is guarded by a takeover marker,
``lease-takeover/<stale token>.<n>``, created with the same conditional put: only the run
that creates it deletes the stale lease, and only after reading it again (it may be
gone, or another run's fresh lease by then). Every other run that judged the same lease
stale finds the marker and goes back to waiting. A marker is never reused while the stale
lease lives: its winner removes it (and any stale markers below it) only once that lease
is gone, so a run that read the stale lease long ago and gets a marker later reads
another lease and deletes nothing. A marker whose winner died is judged stale as a lease
is, and the next number is tried: it never blocks for longer than a lease would.

What no lease without fencing tokens prevents: a holder on another host that stalls for
longer than ``ttl`` (15 minutes; a finish writes pages, it does not convert) is taken over
while it still runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from types import TracebackType

from ..errors import DistributionError
from ..processes import alive
from ..reading import parse_json
from .store import Destination

LEASE_KEY = ".kernel-wheels/mirror/lease"
#: ``<stale holder's token>.<n>``: who is removing which stale lease.
TAKEOVER = ".kernel-wheels/mirror/lease-takeover"
DEFAULT_TTL = 900.0
_TOKEN = re.compile(r"[0-9a-f]{1,64}")


class LeaseBusyError(DistributionError):
    """Another run holds the lease, and still did after waiting."""


def _alive_here(holder: dict[str, object]) -> bool | None:
    """Whether the holder's process lives; None when it is on another host."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return None
    return alive(pid)


def _holder(raw: bytes) -> dict[str, object]:
    """A lease's (or marker's) fields; empty for anything no run wrote (not JSON, not an
    object, nested too deeply for the parser)."""
    try:
        holder = parse_json(raw)
    except (ValueError, RecursionError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _holder_token(raw: bytes) -> str:
    """The token a lease (or marker) names, as a key part; a digest of anything else."""
    token = _holder(raw).get("token")
    if isinstance(token, str) and _TOKEN.fullmatch(token):
        return token
    return "x" + hashlib.sha256(raw).hexdigest()[:32]


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
        holder = _holder(raw)
        try:
            expires = float(holder["expires"])  # type: ignore[arg-type]
        except (ValueError, KeyError, TypeError):
            return True  # not a lease any run wrote (a torn folder write cannot happen)
        alive = _alive_here(holder)
        return alive is False or (alive is None and self.clock() > expires)

    def _take_over(self, stale: bytes) -> bool:
        """Delete the stale lease ``stale`` if this run wins its takeover marker; False
        when another (live) run holds the marker: it does the takeover."""
        prefix = f"{TAKEOVER}/{_holder_token(stale)}"
        number = 0
        while not self.store.put(f"{prefix}.{number}", self._body(), if_absent=True):
            marker = self.store.get(f"{prefix}.{number}")
            if marker is None:
                continue  # its winner just removed it: the stale lease is gone; try again
            if not self._stale(marker):
                return False
            number += 1  # its winner died: the next marker, never a delete of this one
        # The one run allowed to remove this stale lease; what it read may be old.
        if self.store.get(LEASE_KEY) == stale:
            self.on_wait(f"{self.store.description}: taking over a lease its holder left")
            self.store.delete(LEASE_KEY)
        # The stale lease is gone for good (tokens are never reused): no later marker
        # winner can delete anything, so the markers may go.
        self.store.delete_many([f"{prefix}.{n}" for n in range(number + 1)])
        return True

    def __enter__(self) -> Lease:
        deadline = self.clock() + self.wait
        told = False
        delay = 0.05
        while not self.store.put(LEASE_KEY, self._body(), if_absent=True):
            raw = self.store.get(LEASE_KEY)
            if raw is None:
                continue  # released between the put and the read
            if self._stale(raw) and self._take_over(raw):
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
        if raw is not None and _holder(raw).get("token") == self.token:
            self.store.delete(LEASE_KEY)
