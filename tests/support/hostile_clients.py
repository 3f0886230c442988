"""Clients that abuse `kernel-wheels serve`, and a client that measures it, for the abuse
tests and for benchmarks/security/serve_abuse.py. Raw sockets and http.client: nothing
of kernel-wheels' own code is trusted to measure kernel-wheels.

- :class:`Waiters`: N requests sent whole and left waiting for their answers (clients
  of a wheel that is being converted);
- :func:`idle_connections` / :func:`half_sent_connections`: sockets that send nothing,
  or part of a request head and then nothing (slowloris);
- :class:`Guessers`: threads that send wrong passwords until told to stop;
- :func:`latencies`: one client on a keep-alive connection, timing each request.
"""

from __future__ import annotations

import base64
import http.client
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def request_bytes(path: str, authorization: str | None = None) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Accept: */*"]
    if authorization:
        lines.append(f"Authorization: {authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def connect(port: int, source: str = "127.0.0.1", timeout: float = 30) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@dataclass
class Sample:
    """Seconds per request, and the statuses seen."""

    seconds: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    @property
    def p50(self) -> float:
        return statistics.median(self.seconds)

    @property
    def p99(self) -> float:
        return self.percentile(99)


def latencies(base: str, path: str, count: int, authorization: str | None = None,
              source: str = "127.0.0.1", timeout: float = 60) -> Sample:
    """``count`` GETs of ``path`` one after the other on one keep-alive connection (as
    pip's session does), each timed from sending to the last byte of its body."""
    url = urlsplit(base)
    headers = {"Authorization": authorization} if authorization else {}
    sample = Sample()
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port,
                                            timeout=timeout, source_address=(source, 0))
    try:
        for _ in range(count):
            started = time.perf_counter()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            sample.seconds.append(time.perf_counter() - started)
            sample.statuses.append(response.status)
    finally:
        connection.close()
    return sample


def raw_get(port: int, target: str, timeout: float = 30) -> tuple[int, bytes]:
    """(status, body) of a GET of ``target`` sent exactly as given (no client library
    normalises it), read by its Content-Length."""
    sock = connect(port, timeout=timeout)
    try:
        sock.sendall(request_bytes(target))
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    finally:
        sock.close()
    status = head.split(b" ", 2)
    return (int(status[1]) if len(status) > 1 else 0), body


class Waiters:
    """``count`` clients that each send a whole request for ``path`` and wait for the
    answer (read in one background thread); ``statuses`` fills as answers arrive."""

    def __init__(self, port: int, path: str, count: int, authorization: str | None = None) -> None:
        self.statuses: list[int] = []
        self._selector = selectors.DefaultSelector()
        self._buffers: dict[socket.socket, bytes] = {}
        self._stop = threading.Event()
        for _ in range(count):
            sock = connect(port)
            sock.sendall(request_bytes(path, authorization))
            sock.setblocking(False)
            self._buffers[sock] = b""
            self._selector.register(sock, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set() and self._buffers:
            for key, _ in self._selector.select(timeout=0.1):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                self._buffers[sock] += data
                if b"\r\n" in self._buffers[sock] or not data:
                    status_line = self._buffers[sock].split(b"\r\n", 1)[0].split()
                    self.statuses.append(int(status_line[1]) if len(status_line) > 1 else 0)
                    self._selector.unregister(sock)
                    sock.close()
                    del self._buffers[sock]

    @property
    def answered(self) -> int:
        return len(self.statuses)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in list(self._buffers):
            sock.close()
        self._selector.close()


def idle_connections(port: int, count: int) -> list[socket.socket]:
    """Connections that send nothing at all."""
    return [connect(port) for _ in range(count)]


def half_sent_connections(port: int, count: int) -> list[socket.socket]:
    """Connections that send the start of a request head and never its end."""
    socks = []
    for _ in range(count):
        sock = connect(port)
        sock.sendall(b"GET /simple/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        socks.append(sock)
    return socks


def all_closed(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server has closed (EOF or reset), without blocking."""
    count = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    count += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            count += 1
    return count


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


class Guessers:
    """``count`` threads sending requests with wrong passwords as fast as the server
    answers them, thread n from ``sources[n % len(sources)]`` (any 127.x.y.z address
    is this machine)."""

    def __init__(self, base: str, path: str, count: int, user: str = "ci",
                 sources: Sequence[str] = ("127.0.0.1",)) -> None:
        self.base, self.path, self.user, self.sources = base, path, user, sources
        self.stop = threading.Event()
        self.sent = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._guess, args=(n,), daemon=True)
                         for n in range(count)]
        for thread in self._threads:
            thread.start()

    def _guess(self, number: int) -> None:
        attempt = 0
        while not self.stop.is_set():
            attempt += 1
            try:
                latencies(self.base, self.path, 1, basic(self.user, f"guess-{number}-{attempt}"),
                          self.sources[number % len(self.sources)], timeout=120)
            except OSError:
                continue
            with self._lock:
                self.sent += 1

    @property
    def guessing(self) -> bool:
        """Whether every thread still guesses (each has a request out at every moment)."""
        return not self.stop.is_set() and all(thread.is_alive() for thread in self._threads)

    def close(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=130)


@contextmanager
def guessing(base: str, path: str, count: int, user: str = "ci",
             sources: Sequence[str] = ("127.0.0.1",)) -> Iterator[Guessers]:
    guessers = Guessers(base, path, count, user, sources)
    try:
        yield guessers
    finally:
        guessers.close()
