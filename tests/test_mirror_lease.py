"""The mirror's lease (``mirror/lease.py``) on a real folder and on a real bucket (moto's
S3 server on 127.0.0.1): runs that judge one stale lease at once never both hold it.

The interleavings are driven, not hoped for: a run's destination is the real one, wrapped
so that its first read of the lease lets another run do its whole takeover before the
answer comes back (the read it acts on is then old, as on a slow network)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from kernel_wheels.mirror.lease import LEASE_KEY, TAKEOVER, Lease, LeaseBusyError
from kernel_wheels.mirror.store import Destination, FolderDestination, S3Destination
from support.mirror_hub import S3Server, s3_server

STALE_TOKEN = "0123456789abcdef"
_buckets = count()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Destination:
    if request.param == "folder":
        return FolderDestination(tmp_path / "site")
    server: S3Server = request.getfixturevalue("s3")
    return S3Destination(server.bucket(f"lease-{os.getpid()}-{next(_buckets)}"), "m", server.client())


def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def holder(host: str, pid: int, token: str, expires: float) -> bytes:
    return json.dumps({"host": host, "pid": pid, "token": token, "expires": expires}).encode()


STALE = {  # the two ways a lease goes stale
    "expired on another host": lambda: holder("other-host.invalid", 1, STALE_TOKEN, 0.0),
    "its process here is gone": lambda: holder(socket.gethostname(), dead_pid(), STALE_TOKEN, 1e12),
}


def ticking() -> Callable[[], float]:
    """A clock that moves on at every look: ``wait=0`` then gives up at the first wait."""
    ticks = count(1_000_000)
    return lambda: float(next(ticks))


def no_sleep(_: float) -> None:
    raise AssertionError("a run with wait=0 gives up before it sleeps")


class PausedAfterRead:
    """A real destination whose first read of the lease runs ``meanwhile`` (another run)
    after reading and before answering: the caller acts on what is by then an old read."""

    def __init__(self, inner: Destination, meanwhile: Callable[[], Any]) -> None:
        self.inner, self.meanwhile = inner, meanwhile
        self.description = inner.description

    def get(self, key: str) -> bytes | None:
        data = self.inner.get(key)
        if key == LEASE_KEY and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return data

    def __getattr__(self, name: str) -> Any:  # put, delete, delete_many, keys: the real ones
        return getattr(self.inner, name)


def token_of(store: Destination) -> str | None:
    raw = store.get(LEASE_KEY)
    return None if raw is None else str(json.loads(raw)["token"])


def markers(store: Destination) -> list[str]:
    return sorted(store.keys(f"{TAKEOVER}/"))


@pytest.mark.parametrize("stale", sorted(STALE))
def test_two_runs_taking_over_one_stale_lease_do_not_both_hold_it(store: Destination, stale: str) -> None:
    store.put(LEASE_KEY, STALE[stale]())
    first = Lease(store)
    # The second run reads the stale lease; before it acts, the first takes it over.
    second = Lease(PausedAfterRead(store, first.__enter__), wait=0, clock=ticking(), sleep=no_sleep)  # type: ignore[arg-type]
    with pytest.raises(LeaseBusyError, match="another mirror run holds the lease"):
        second.__enter__()
    assert token_of(store) == first.token  # the first run's lease, not deleted under it
    assert markers(store) == []
    first.__exit__(None, None, None)
    assert token_of(store) is None
    with Lease(store) as third:  # and the lease is free again
        assert token_of(store) == third.token


def test_a_run_that_read_the_stale_lease_long_ago_deletes_nothing(store: Destination) -> None:
    """The first run takes over, finishes and is followed by a third run, all while the
    second still acts on its old read: its marker is free again, and it must not use it."""
    store.put(LEASE_KEY, STALE["expired on another host"]())
    first, third = Lease(store), Lease(store)

    def meanwhile() -> None:
        with first:
            pass
        third.__enter__()

    second = Lease(PausedAfterRead(store, meanwhile), wait=0, clock=ticking(), sleep=no_sleep)  # type: ignore[arg-type]
    with pytest.raises(LeaseBusyError):
        second.__enter__()
    assert token_of(store) == third.token and markers(store) == []


def test_a_takeover_marker_whose_winner_died_does_not_block(store: Destination) -> None:
    store.put(LEASE_KEY, STALE["expired on another host"]())
    store.put(f"{TAKEOVER}/{STALE_TOKEN}.0", holder(socket.gethostname(), dead_pid(), "feedfacefeedface", 1e12))
    store.put(f"{TAKEOVER}/{STALE_TOKEN}.1", holder("other-host.invalid", 1, "beefbeefbeefbeef", 0.0))
    with Lease(store, wait=0, clock=ticking(), sleep=no_sleep) as lease:
        assert token_of(store) == lease.token
        assert markers(store) == []  # the dead winners' markers went with the stale lease


def test_a_live_takeover_is_left_to_its_run(store: Destination) -> None:
    """A marker held by a live run: this run waits for it rather than delete anything."""
    stale = STALE["expired on another host"]()
    store.put(LEASE_KEY, stale)
    marker = f"{TAKEOVER}/{STALE_TOKEN}.0"
    store.put(marker, holder(socket.gethostname(), os.getpid(), "feedfacefeedface", 1e12))
    with pytest.raises(LeaseBusyError):
        Lease(store, wait=0, clock=ticking(), sleep=no_sleep).__enter__()
    assert store.get(LEASE_KEY) == stale and markers(store) == [marker]


def test_a_lease_that_is_not_json_is_taken_over(store: Destination) -> None:
    store.put(LEASE_KEY, b"\x00not a lease")
    with Lease(store, wait=0, clock=ticking(), sleep=no_sleep) as lease:
        assert token_of(store) == lease.token and markers(store) == []
