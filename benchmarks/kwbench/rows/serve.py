"""``kernel-wheels serve`` (issue #12, item 4): time to first byte of an uncached wheel
(converted on request) against ``to-wheel`` of the same variant, of the same wheel once
cached, and requests per second for an index page.

Each run starts ``kernel-wheels serve`` (a new process, as a user starts it) with an
empty wheel cache, in front of olah, online, with the warm HF cache that the to-wheel
baseline also uses. It waits for ``/healthz``, reads the project's page once (the Hub
listing, untimed), then times one GET of the variant's wheel (the server converts and
checks it) to the first body byte and to the last, the same GET again (now from the
cache), and finally GETs the project page from 4 keep-alive connections for a few
seconds. The wheel's file name comes from the wheel contract (``plan_wheel``), and the
served bytes must equal what ``to-wheel --variant`` wrote: both sides did the same work.
"""

from __future__ import annotations

import hashlib
import http.client
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit

from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.wheel.plan import TagOptions, plan_wheel

from ..bench import OUT, Bench, command_exists, fresh, wheels_in
from ..config import KERNEL_NAME, KERNEL_WHEELS, RELEASE, WORK
from ..measure import run_once
from ..olah import free_port, stop
from ..report import Row
from ..workloads import KernelRepo

CLIENTS = 4
PAGE = f"/simple/{KERNEL_NAME}/"


def _rows(variant: str) -> list[Row]:
    return [
        Row("serve/uncached", f"serve: first byte, uncached wheel ({variant})",
            "time to first byte of a wheel the server has not converted yet (it converts and "
            "checks it on request) vs to-wheel --variant of the same variant, warm HF cache", "s"),
        Row("serve/cached", "serve: first byte, cached wheel",
            "time to first byte of the same wheel asked for again", "s"),
        Row("serve/index", "serve: index page requests/s",
            f"GET {PAGE} (HTML) from {CLIENTS} keep-alive connections", "req/s"),
    ]


def _connection(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=600)


def _get(base: str, path: str, accept: str = "*/*") -> tuple[int, bytes]:
    conn = _connection(base)
    try:
        conn.request("GET", path, headers={"Accept": accept})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _timed_fetch(base: str, path: str) -> tuple[float, float, bytes]:
    """(seconds to the first body byte, seconds to the last, the body) of one GET."""
    conn = _connection(base)
    try:
        start = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        first = response.read(1)
        ttfb = time.perf_counter() - start
        rest = response.read()
        total = time.perf_counter() - start
    finally:
        conn.close()
    body = first + rest
    if response.status != 200 or not body.startswith(b"PK"):
        raise RuntimeError(f"GET {path}: HTTP {response.status}, not a wheel: {body[:200]!r}")
    return ttfb, total, body


@contextmanager
def _server(bench: Bench, repo: KernelRepo, cache: Path) -> Iterator[str]:
    port = free_port()
    log = WORK / "logs" / "serve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(KERNEL_WHEELS), "serve", "--kernels", repo.repo_id, "--cache", str(cache),
             "--host", "127.0.0.1", "--port", str(port)],
            env=bench.ours_env(offline=False), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if _get(base, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kernel-wheels serve did not start:\n{log.read_text()[-1500:]}")
            time.sleep(0.2)
        yield base
    finally:
        stop(process)


def _index_rps(base: str, seconds: float) -> float:
    counts = [0] * CLIENTS
    stop = time.perf_counter() + seconds

    def client(slot: int) -> None:
        conn = _connection(base)
        try:
            while time.perf_counter() < stop:
                conn.request("GET", PAGE, headers={"Accept": "text/html"})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    raise RuntimeError(f"GET {PAGE}: HTTP {response.status}")
                counts[slot] += 1
        finally:
            conn.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - start)


def run(bench: Bench) -> list[Row]:
    count = min(bench.sizes.variant_counts)
    repo = bench.repos[f"release/{count}"]
    variant = repo.variants[0]
    rows = _rows(variant)
    if not command_exists("serve"):
        for row in rows:
            row.note = "n/a (command missing)"
        return rows
    wheel = plan_wheel(parse_variant(variant), KERNEL_NAME, RELEASE, TagOptions()).filename
    path = "/files/" + quote(wheel, safe="")
    bench.progress(f"  serve vs to-wheel --variant {variant} ({repo.repo_id})")
    baseline = bench.ours_to_wheel("serve-baseline", repo, offline=False,
                                   extra=("--variant", variant), expect=1)
    uncached, totals, cached, rps, to_wheel = [], [], [], [], []
    for n in range(bench.sizes.runs):
        to_wheel.append(run_once(baseline).seconds)  # its verify: exactly one wheel
        expected = hashlib.sha256(wheels_in(OUT / "serve-baseline")[0].read_bytes()).hexdigest()
        cache = WORK / "serve-cache"
        fresh(cache)
        with _server(bench, repo, cache) as base:
            status, _ = _get(base, PAGE)  # the Hub listing: not what is measured
            if status != 200:
                raise RuntimeError(f"GET {PAGE}: HTTP {status}")
            first, total, body = _timed_fetch(base, path)
            if hashlib.sha256(body).hexdigest() != expected:
                raise RuntimeError(f"the served {wheel} differs from to-wheel's")
            uncached.append(first)
            totals.append(total)
            cached.append(_timed_fetch(base, path)[0])
            rps.append(_index_rps(base, bench.sizes.serve_index_seconds))
        bench.progress(f"    run {n + 1}/{bench.sizes.runs}: uncached {uncached[-1]:.2f} s, cached "
                       f"{cached[-1] * 1000:.1f} ms, to-wheel {to_wheel[-1]:.2f} s, index "
                       f"{rps[-1]:.0f} req/s")
    rows[0].ours, rows[0].baseline = statistics.median(uncached), statistics.median(to_wheel)
    rows[0].samples = {"ours": uncached, "baseline": to_wheel, "ours_complete": totals}
    rows[0].note = f"whole wheel received after {statistics.median(totals):.2f} s (median)"
    rows[1].ours, rows[1].samples = statistics.median(cached), {"ours": cached}
    rows[2].ours, rows[2].samples = statistics.median(rps), {"ours": rps}
    return rows
