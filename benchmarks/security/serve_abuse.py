"""`kernel-wheels serve` under abuse, measured: real servers on 127.0.0.1, bounded loads,
one table.

    .venv/bin/python -m benchmarks.security.serve_abuse            # about two minutes
    .venv/bin/python -m benchmarks.security.serve_abuse --quick    # a smaller run

What runs: a hostile Hub of our own (tests/support/serve_hub.py) serving two kernels, one of
which stalls the variant listing of every conversion; `kernel-wheels serve` (the real
command, a subprocess) in front of it with authentication on (sha512-crypt at passlib's
default cost, the slow hash a real htpasswd file has) and the other kernel's wheel
already cached. Then, each load applied alone and ended before the next:

1. cached wheel and project page, one keep-alive client, nothing else going on;
2. the same while 50 clients wait on the stalled conversion;
3. the same while 500 idle and 500 half-sent connections are open;
4. the same (authenticated, remembered) while 20 clients from 20 addresses send wrong
   passwords;
5. wrong passwords for a known and for an unknown user, in turns, each try from a fresh
   address, before the guessing: the ratio of the medians (1.0: no user-name oracle);
6. the stalled Hub released: upstream attempts for the 50 waiters, and after 20 more
   requests within the back-off window;
7. how long the server took to close the 1,000 idle and half-sent connections.

Latencies are from sending a request to the last byte of its answer, on one
keep-alive connection (as pip's session does). The clients are raw sockets and
http.client (tests/support/hostile_clients.py): nothing of kernel-wheels measures itself.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from tests.support.hostile_clients import (
    Sample,
    Waiters,
    all_closed,
    basic,
    close_all,
    guessing,
    half_sent_connections,
    idle_connections,
    latencies,
)
from tests.support.serve_hub import HubRepo, commit_of, hostile_hub, port_of, wait_until
from tests.support.servers_serve import Serve, get, serve

ROOT = Path(__file__).resolve().parents[2]

PASSWORD = "bench-secret-3141"
GOOD, STALL = "good/cachedk", "evil/stall"
GOOD_WHEEL, STALL_WHEEL = "cachedk-1.0.0-py3-none-any.whl", "stall-1.0.0-py3-none-any.whl"
STALLED_FETCH = r"GET /api/kernels/evil/stall/tree/[^/]+/build%2Ftorch-universal"
WAITERS, IDLE, HALF_SENT, GUESSERS = 50, 500, 500, 20
# Password checks of known and of unknown users, in turns: enough that the medians hold on a
# shared machine (each costs one hash, a few hundred ms at the cost of the htpasswd file).
ORACLE_TRIES = 24


@dataclass(frozen=True)
class Row:
    what: str
    p50: str = ""
    p99: str = ""
    note: str = ""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def sample_rows(label: str, samples: dict[str, Sample]) -> list[Row]:
    rows = []
    for what, sample in samples.items():
        bad = [s for s in sample.statuses if s != 200]
        rows.append(Row(f"{what}, {label}", ms(sample.p50), ms(sample.p99),
                        f"{len(sample.seconds)} requests" + (f", {len(bad)} not 200" if bad else "")))
    return rows


def measure(server: Serve, count: int, seconds: float = 0.0) -> dict[str, Sample]:
    """``count`` requests of each kind, repeated in rounds until ``seconds`` have passed
    (a load that changes over time is then sampled over its course)."""
    authorization = basic("ci", PASSWORD)
    paths = {"cached wheel": f"/files/{GOOD_WHEEL}", "project page": "/simple/cachedk/"}
    samples = {what: Sample() for what in paths}
    started = time.monotonic()
    while True:
        for what, path in paths.items():
            sample = latencies(server.base, path, count, authorization)
            samples[what].seconds += sample.seconds
            samples[what].statuses += sample.statuses
        if time.monotonic() - started >= seconds:
            return samples


def waiting(server: Serve, count: int) -> bool:
    status, _, body = get(f"{server.base}healthz", auth=("ci", PASSWORD))
    import json

    return status == 200 and json.loads(body)["conversions"]["waiting"] == count


def wrong_password(server: Serve, user: str, source: str) -> float:
    sample = latencies(server.base, "/simple/", 1, basic(user, "wrong"), source)
    return sample.seconds[0]


def htpasswd(folder: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.hash import sha512_crypt
    path = folder / "htpasswd"
    path.write_text(f"ci:{sha512_crypt.hash(PASSWORD)}\n")
    return path


def run(folder: Path, count: int, idle_timeout: float, guessing_seconds: float) -> list[Row]:
    rows: list[Row] = []
    repos = {GOOD: HubRepo({"v1.0.0": commit_of("good")}), STALL: HubRepo({"v1.0.0": commit_of("stall")})}
    env = {"HF_HOME": str(folder / "hf-home"), "KERNEL_WHEELS_CACHE": str(folder / "kw-cache"),
           "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    with hostile_hub(**repos) as hub:
        hub.rule(STALLED_FETCH, "stall")
        with serve(f"{GOOD},{STALL}", folder / "cache", {**env, "HF_ENDPOINT": hub.endpoint},
                   "--auth-file", str(htpasswd(folder)), "--retries", "0", "--timeout", "600",
                   "--idle-timeout", str(idle_timeout)) as server:
            auth = ("ci", PASSWORD)
            assert get(f"{server.base}files/{GOOD_WHEEL}", auth=auth)[0] == 200
            measure(server, 20)  # warm: the credential is remembered, pages are rendered once
            port = port_of(server.base)

            rows += sample_rows("alone", measure(server, count))
            # Known and unknown users in turns (both see the same machine), while the hash
            # process is idle (before the guessing below).
            known, unknown = [], []
            for n in range(1, ORACLE_TRIES + 1):
                known.append(wrong_password(server, "ci", f"127.0.6.{n}"))
                unknown.append(wrong_password(server, f"nobody{n}", f"127.0.7.{n}"))

            socks = idle_connections(port, IDLE) + half_sent_connections(port, HALF_SENT)
            opened = time.monotonic()
            # Connections are accepted in order: once a new one is answered, the server
            # holds all 1,000 (what is measured is their being open, not their arrival).
            latencies(server.base, "/healthz", 1)
            rows += sample_rows(f"{IDLE} idle + {HALF_SENT} half-sent connections open",
                                measure(server, count))
            still_open = len(socks) - all_closed(socks)
            wait_until(lambda: all_closed(socks) == len(socks), idle_timeout + 120,
                       "the idle connections to be closed", interval=0.1)
            closed_after = time.monotonic() - opened
            close_all(socks)

            with guessing(server.base, "/simple/", GUESSERS,
                          sources=[f"127.0.5.{n}" for n in range(1, GUESSERS + 1)]) as guessers:
                wait_until(lambda: guessers.sent >= 1, 120, "a wrong password answered")
                first = guessers.sent
                rows += sample_rows(f"{GUESSERS} clients sending wrong passwords",
                                    measure(server, count, guessing_seconds))
                guessed = guessers.sent - first


            clients = Waiters(port, f"/files/{STALL_WHEEL}", WAITERS, basic("ci", PASSWORD))
            try:
                wait_until(lambda: waiting(server, WAITERS), 120, "the waiters")
                rows += sample_rows(f"{WAITERS} clients waiting on a stalled conversion",
                                    measure(server, count))
                attempts_while_waiting = hub.count(STALLED_FETCH)
                hub.release.set()
                wait_until(lambda: clients.answered == WAITERS, 120, "the waiters' answers")
            finally:
                clients.close()
            retried = latencies(server.base, f"/files/{STALL_WHEEL}", 20, basic("ci", PASSWORD))
            attempts = hub.count(STALLED_FETCH)

    rows += [
        Row("wrong password, known user", ms(statistics.median(known)), ms(max(known)),
            f"{ORACLE_TRIES} tries"),
        Row("wrong password, unknown user", ms(statistics.median(unknown)), ms(max(unknown)),
            f"{ORACLE_TRIES} tries"),
        Row("unknown / known user time (medians)",
            note=f"{statistics.median(unknown) / statistics.median(known):.2f} (1.00: no oracle)"),
        Row("wrong passwords answered while measuring under guessing",
            note=f"{guessed} in {guessing_seconds:g} s or more (each address is slowed after 5)"),
        Row(f"upstream attempts for {WAITERS} waiters",
            note=f"{attempts_while_waiting} while they waited; {attempts} after the failure and 20 "
                 f"retries ({sorted(set(clients.statuses))} to the waiters, "
                 f"{sorted(set(retried.statuses))} to the retries, retries p99 {ms(retried.p99)})"),
        Row(f"{IDLE + HALF_SENT} idle and half-sent connections closed after",
            note=f"{closed_after:.1f} s (--idle-timeout {idle_timeout:g}); {still_open} open after "
                 "the first measurement"),
    ]
    return rows


def table(rows: list[Row]) -> str:
    widths = [max(len(getattr(r, f)) for r in [*rows, Row("what", "p50", "p99", "note")])
              for f in ("what", "p50", "p99", "note")]
    lines = []
    for row in [Row("what", "p50", "p99", "note"), None, *rows]:
        if row is None:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
            continue
        cells = [row.what, row.p50, row.p99, row.note]
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="50 requests per round, 5 s idle timeout, 5 s of guessing")
    parser.add_argument("--requests", type=int, help="requests per latency row (default 300; quick 50)")
    args = parser.parse_args()
    count = args.requests or (50 if args.quick else 300)
    idle_timeout = 5.0 if args.quick else 15.0
    guessing_seconds = 5.0 if args.quick else 20.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kw-serve-abuse-") as folder:
        rows = run(Path(folder), count, idle_timeout, guessing_seconds)
    print(table(rows))
    print(f"\n{'quick' if args.quick else 'full'} run, {time.monotonic() - started:.0f} s; "
          f"latencies from one keep-alive client, authenticated (remembered)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
