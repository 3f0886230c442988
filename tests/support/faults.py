"""Helpers for the reliability tests (issue #9): a fault-injecting HTTP proxy, a server
that records requests, output-folder invariants, and the tally behind docs/reliability.md.

The proxy is a real server, not a mock: it listens on a real socket on 127.0.0.1, forwards
real HTTP requests to a real upstream (olah serving a Hub kernel) and writes real HTTP
answers back. Per rule it breaks an exchange the way a network or a Hub does: it resets
the connection, cuts a download short, answers 401/403/404/429/500, sends fewer bytes
than it announced, lies consistently about a file's size, changes a byte, stalls, or
sends a body slowly, a few bytes at a time.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import struct
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from kernel_wheels.checks import judge_wheel as check_wheel

from .http_server import LoopbackServer

STAGING_GLOB = ".kernel-wheels-*"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-connection"}


# -- the fault-injecting proxy ----------------------------------------------------------
@dataclass
class Rule:
    """A fault for requests whose ``"METHOD /path"`` matches ``pattern``.

    Faults: ``reset`` (close the connection with an RST, no answer), ``status`` (answer
    ``status`` with ``headers``, where ``{path}`` stands for the request's path), ``cut`` (announce the whole body, send half, RST),
    ``truncate`` (announce the whole body, send half, close cleanly), ``short`` (a file
    shorter than the real one, announced consistently by HEAD and GET), ``flip`` (the whole
    body with one byte changed), ``stall`` (accept,
    never answer), ``stall_body`` (answer, send half the body, then stall), ``slow`` (the
    whole body, 1 kB every ``every`` seconds; how each such transfer ended is recorded).
    ``times``: applied to that many matching requests, then requests pass (None: always).
    """

    pattern: re.Pattern[str]
    fault: str
    times: int | None = None
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    every: float = 0.05
    hits: int = 0

    def take(self, line: str) -> bool:
        if not self.pattern.search(line):
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True


@dataclass(frozen=True)
class SlowTransfer:
    """How a ``slow`` answer ended: ``finished`` (every byte sent), ``client left`` (a
    write failed: the client closed the connection) or ``released`` (the test ended it)."""

    sent: int
    total: int
    how: str


class FaultProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of ``upstream`` (None: every request
    that no rule catches gets a 503; use it to record requests)."""

    def __init__(self, upstream: str | None, port: int = 0) -> None:
        self.upstream = urlsplit(upstream) if upstream else None
        self.rules: list[Rule] = []
        self.log: list[tuple[str, str]] = []  # ("METHOD /path", what happened)
        self.authorization: list[str] = []  # the Authorization header of every request
        self.slow_transfers: list[SlowTransfer] = []  # how each "slow" answer ended
        self.slow_sent = 0  # bytes of the "slow" answer under way sent so far
        self.release = threading.Event()  # ends every stall
        self._lock = threading.Lock()
        self._server = LoopbackServer(_handler(self), port=port or None)

    # -- lifecycle --------------------------------------------------------------------
    def up(self) -> FaultProxy:
        """Start listening (again, on the same port after :meth:`down`)."""
        self._server.start()
        return self

    def down(self) -> None:
        """Stop listening: a connection to the port is refused, as to a server that is down."""
        self.release.set()
        self._server.stop()
        self.release = threading.Event()

    def __enter__(self) -> FaultProxy:
        return self.up()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    # -- rules ------------------------------------------------------------------------
    def add(self, pattern: str, fault: str, *, times: int | None = None, status: int = 500,
            headers: dict[str, str] | None = None, every: float = 0.05) -> Rule:
        rule = Rule(re.compile(pattern), fault, times, status, headers or {}, every)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
        self.release.set()
        self.release = threading.Event()

    @property
    def faults_injected(self) -> int:
        return sum(what != "passed" for _, what in self.log)

    def requests(self, pattern: str = "") -> list[str]:
        return [line for line, _ in self.log if re.search(pattern, line)]

    # -- serving ----------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        line = f"{h.command} {h.path}"
        with self._lock:
            rule = next((r for r in self.rules if r.take(line)), None)
            self.log.append((line, rule.fault if rule else "passed"))
            self.authorization.append(h.headers.get("Authorization", ""))
        length = int(h.headers.get("Content-Length") or 0)
        request_body = h.rfile.read(length) if length else None
        h.close_connection = True
        if rule is not None and rule.fault == "stall":
            self.release.wait(120)
            return
        if rule is not None and rule.fault == "reset":
            _reset(h.connection)
            return
        if rule is not None and rule.fault == "status":
            body = json.dumps({"error": f"injected HTTP {rule.status}"}).encode()
            headers = {k: v.replace("{path}", h.path) for k, v in rule.headers.items()}
            self._answer(h, rule.status, {"Content-Type": "application/json", **headers},
                         body, len(body))
            return
        if self.upstream is None:
            body = b'{"error": "recording server"}'
            self._answer(h, 503, {"Content-Type": "application/json"}, body, len(body))
            return
        status, headers, body = self._forward(h.command, h.path, dict(h.headers), request_body)
        if rule is not None and rule.fault == "short" and h.command == "HEAD":
            body = self._forward("GET", h.path, dict(h.headers), None)[2]  # to know its size
        if rule is not None and rule.fault == "slow":  # a slow link: 1 kB every ``every`` s
            self._answer(h, status, headers, b"", len(body), finish=False)
            self._record(self._slow(h, body, rule.every), len(body))
            return
        if rule is None or rule.fault not in ("cut", "truncate", "stall_body", "short", "flip") \
                or len(body) < 2 and h.command != "HEAD":
            self._answer(h, status, headers, b"" if h.command == "HEAD" else body,
                         _length(headers, b"" if h.command == "HEAD" else body))
            return
        if rule.fault == "flip":  # the right length, one byte changed: only a digest sees it
            changed = bytearray(body)
            changed[len(changed) // 2] ^= 0xFF
            self._answer(h, status, headers, bytes(changed), len(changed))
            return
        half = body[:len(body) // 2]
        if rule.fault == "short":  # a consistent lie: HEAD and GET both say the shorter size
            for key in list(headers):
                if key.lower() in ("x-linked-size",):
                    headers[key] = str(len(half))
            self._answer(h, status, headers, b"" if h.command == "HEAD" else half, len(half))
            return
        self._answer(h, status, headers, half, len(body), finish=False)
        if rule.fault == "cut":
            _reset(h.connection)
        elif rule.fault == "stall_body":
            self.release.wait(120)

    def _slow(self, h: BaseHTTPRequestHandler, body: bytes, every: float) -> tuple[int, str]:
        """Send ``body`` 1 kB at a time; (bytes sent, how it ended)."""
        release, sent = self.release, 0
        self.slow_sent = 0
        for start in range(0, len(body), 1024):
            if release.wait(every):
                return sent, "released"
            try:
                h.wfile.write(body[start:start + 1024])
                h.wfile.flush()
            except OSError:
                return sent, "client left"  # the client gave up
            sent += len(body[start:start + 1024])
            self.slow_sent = sent
        return sent, "finished"

    def _record(self, outcome: tuple[int, str], total: int) -> None:
        with self._lock:
            self.slow_transfers.append(SlowTransfer(outcome[0], total, outcome[1]))

    def _forward(self, method: str, path: str, headers: dict[str, str],
                 body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        assert self.upstream is not None and self.upstream.hostname is not None
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            sent = {k: v for k, v in headers.items()
                    if k.lower() not in _HOP_BY_HOP and k.lower() not in ("host", "content-length")}
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            data = response.read()
            answer = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
        finally:
            conn.close()
        netloc = self.upstream.netloc
        for key, value in answer.items():  # redirects to the upstream come back here
            if netloc in value:
                answer[key] = value.replace(netloc, f"127.0.0.1:{self.port}")
        return response.status, answer, data

    def _answer(self, h: BaseHTTPRequestHandler, status: int, headers: dict[str, str],
                body: bytes, length: int, *, finish: bool = True) -> None:
        try:
            h.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("server", "date", "content-length"):
                    h.send_header(key, value)
            h.send_header("Content-Length", str(length))
            h.send_header("Connection", "close")
            h.end_headers()
            if body:
                h.wfile.write(body)
            h.wfile.flush()
        except OSError:
            pass  # the client gave up first


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            proxy._handle(self)

        do_HEAD = do_POST = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _length(headers: dict[str, str], body: bytes) -> int:
    """What to announce: the body's length, or for a HEAD answer the upstream's."""
    return len(body) if body else int(next((v for k, v in headers.items()
                                            if k.lower() == "content-length"), 0))


def _reset(connection: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a server process that dies does."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass


# -- output-folder invariants -----------------------------------------------------------
def staging_folders(folder: Path) -> list[Path]:
    return sorted(folder.glob(STAGING_GLOB)) if folder.is_dir() else []


def visible_wheels(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.whl")) if folder.is_dir() else []


def partial_wheels(folder: Path, reference: dict[str, bytes] | None = None) -> list[str]:
    """Every ``*.whl`` in ``folder`` that is not a whole, valid wheel: not byte-identical
    to its reference (when given), or failing ``check``."""
    bad = []
    for wheel in visible_wheels(folder):
        if reference is not None and wheel.name in reference:
            if wheel.read_bytes() != reference[wheel.name]:
                bad.append(wheel.name)
            continue
        try:
            with zipfile.ZipFile(wheel) as zf:
                if zf.testzip() is not None:
                    bad.append(wheel.name)
                    continue
        except (zipfile.BadZipFile, OSError):
            bad.append(wheel.name)
            continue
        if not check_wheel(wheel).passed:
            bad.append(wheel.name)
    return bad


def one_error_line(proc: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The run failed with ``code`` and one ``kernel-wheels: error:`` line (the last line of
    stderr, no traceback); returns the message after the prefix."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("kernel-wheels: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    return errors[0].removeprefix("kernel-wheels: error: ")


# -- the tally behind docs/reliability.md -----------------------------------------------
def tally(row: str, *, inputs: int = 0, faults: int = 0, inspected: int = 0, partial: int = 0) -> None:
    """Count what a test tried: ``inputs`` (cases, trees, option values, fuzz examples),
    ``faults`` injected, output folders ``inspected`` after a failure or an interruption,
    and ``partial`` (or corrupt) wheels found there (the tests assert 0). With
    KW_RELIABILITY_TALLY=FILE the counts are appended to FILE as JSON lines, which
    docs/reliability.md's totals sum."""
    target = os.environ.get("KW_RELIABILITY_TALLY")
    if not target:
        return
    line = json.dumps({"row": row, "inputs": inputs, "faults": faults, "inspected": inspected,
                       "partial": partial, "time": time.time()})
    with open(target, "a", encoding="utf-8") as out:
        out.write(line + "\n")
