"""A hostile package index on 127.0.0.1: ``http.server`` in a thread, answering each
path with a route a test chooses (pages linking to other hosts, redirects, answers
that echo the credentials, garbage, huge or trickling bodies, an upload read a byte at
a time), and recording every request it gets (method, path, Host, Authorization), so
that a test can tell which origin received a credential."""

from __future__ import annotations

import base64
import html
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from .http_server import LoopbackServer

USER = "ci-bot"
PASSWORD = "s3cr&t/Pass+word=42"


def secret_forms(user: str = USER, password: str = PASSWORD) -> list[str]:
    """Every spelling of the credentials that must never reach output."""
    from urllib.parse import quote, quote_plus

    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [password, quote(password, safe=""), quote_plus(password), basic, basic.rstrip("="),
            base64.b64encode(password.encode()).decode(), f"{user}:{password}"]


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    host: str
    authorization: str | None


Route = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def index(self) -> HostileIndex:
        """The server's owner: its routes, what it has seen, whether it is stopping."""
        index: HostileIndex = self.server.owner  # type: ignore[attr-defined]
        return index

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass

    def _dispatch(self) -> None:
        index = self.index
        path = self.path.split("?", 1)[0]
        index.seen.append(Seen(self.command, path, self.headers.get("Host", ""),
                               self.headers.get("Authorization")))
        route = index.routes.get(path)
        if route is None:
            answer(404, b"not here")(self)
        else:
            route(self)

    do_GET = _dispatch
    do_HEAD = _dispatch
    do_POST = _dispatch

    def credentials(self) -> tuple[str, str]:
        """The Basic credentials the request carried ("", "" when none)."""
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Basic "):
            return "", ""
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return user, password

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length)


class HostileIndex:
    """The server; ``routes`` maps a path (no query) to its route, anything else is
    404. Use as a context manager: it listens on 127.0.0.1 until the block ends."""

    def __init__(self, small_receive_buffer: bool = False) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        self._server = LoopbackServer(Handler, owner=self, receive_buffer=4096 if small_receive_buffer else None)

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base(self) -> str:
        return self._server.base

    def __enter__(self) -> HostileIndex:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.stop()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def authorizations(self, path: str | None = None) -> list[str | None]:
        return [s.authorization for s in self.seen if path is None or s.path == path]

    def requests(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]


# --- routes ------------------------------------------------------------------------------


def answer(status: int = 200, body: bytes = b"", content_type: str = "text/html",
           headers: dict[str, str] | None = None, reason: str | None = None) -> Route:
    def route(handler: Handler) -> None:
        if handler.command == "POST":
            handler.read_body()
        handler.send_response(status, reason)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    return route


def html_page(*links: tuple[str, dict[str, str]]) -> Route:
    def attributes(attrs: dict[str, str]) -> str:
        return " ".join(f'{name}="{html.escape(value)}"' for name, value in attrs.items())

    anchors = "".join(f'<a href="{html.escape(href)}" {attributes(attrs)}>x</a><br>\n'
                      for href, attrs in links)
    return answer(body=f"<!DOCTYPE html><html><body>\n{anchors}</body></html>\n".encode())


def json_page(document: object) -> Route:
    return answer(body=json.dumps(document).encode(),
                  content_type="application/vnd.pypi.simple.v1+json")


def redirect(location: str, status: int = 302) -> Route:
    return answer(status, b"", headers={"Location": location})


def file_route(data: bytes) -> Route:
    return answer(body=data, content_type="application/octet-stream")


def trickle(body: bytes, every: float = 0.05, headers_too: bool = False) -> Route:
    """Sends one byte every ``every`` seconds (from the status line on with
    ``headers_too``), until the body is out, the client leaves or the server stops."""

    def route(handler: Handler) -> None:
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}"
                "\r\n\r\n").encode()
        if not headers_too:
            handler.wfile.write(head)
            handler.wfile.flush()
        stream = body if not headers_too else head + body
        stopping = handler.index.stopping
        try:
            for index in range(len(stream)):
                if stopping.wait(every):
                    return
                handler.wfile.write(stream[index:index + 1])
                handler.wfile.flush()
        except OSError:  # the client gave up: what is being tested
            return
        handler.close_connection = True

    return route


def endless(byte: bytes = b"<", every: float = 0.05) -> Route:
    """A page that never ends: a trickle with no length."""

    def route(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.flush()
        stopping = handler.index.stopping
        try:
            while not stopping.wait(every):
                handler.wfile.write(byte)
                handler.wfile.flush()
        except OSError:
            pass
        handler.close_connection = True

    return route


def paced(body: bytes, per_second: int) -> Route:
    """``body`` at about ``per_second`` bytes a second, in tenths of a second."""

    def route(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        step = max(1, per_second // 10)
        stopping = handler.index.stopping
        try:
            for start in range(0, len(body), step):
                if stopping.wait(0.1):
                    return
                handler.wfile.write(body[start:start + step])
                handler.wfile.flush()
        except OSError:
            return

    return route


def huge(size: int, declared: int | None = None) -> Route:
    """``size`` bytes of page as fast as they go, with no length (or a false one)."""

    def route(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        if declared is not None:
            handler.send_header("Content-Length", str(declared))
        handler.send_header("Connection", "close")
        handler.end_headers()
        block = b"<a href='x'>" * 8192
        try:
            sent = 0
            while sent < size and not handler.index.stopping.is_set():
                handler.wfile.write(block)
                sent += len(block)
        except OSError:
            pass
        handler.close_connection = True

    return route


def slow_reader(every: float = 0.1, chunk: int = 1024) -> Route:
    """An upload read ``chunk`` bytes every ``every`` seconds; answered 200 if it ever
    arrives in full."""

    def route(handler: Handler) -> None:
        left = int(handler.headers.get("Content-Length") or 0)
        stopping = handler.index.stopping
        try:
            while left > 0:
                if stopping.wait(every):
                    return
                data = handler.rfile.read1(min(chunk, left))
                if not data:
                    return
                left -= len(data)
        except OSError:
            return
        answer(200, b"ok")(handler)

    return route


def echo_credentials(status: int, *, location: bool = False) -> Route:
    """Answers ``status`` with the request's credentials in every place a message could
    pick them up: the reason phrase, the body's first line (as they came, decoded,
    URL-encoded, in a URL) and the Location header."""
    from urllib.parse import quote

    def route(handler: Handler) -> None:
        if handler.command == "POST":
            handler.read_body()
        header = handler.headers.get("Authorization") or "none"
        user, password = handler.credentials()
        body = (f"denied: {header} user={user} password={password} encoded={quote(password, safe='')} "
                f"url=http://{user}:{quote(password, safe='')}@127.0.0.1/x Authorization: {header}\n"
                "second line\n").encode()
        handler.send_response(status, f"Bad {header} {password}")
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(body)))
        if location:
            handler.send_header("Location",
                                f"http://{user}:{quote(password, safe='')}@127.0.0.1:9/{password}")
        handler.end_headers()
        handler.wfile.write(body)

    return route


def wait_until(condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.01)


@dataclass
class Servers:
    index: HostileIndex
    elsewhere: HostileIndex


def pair(small_receive_buffer: bool = False) -> Iterator[Servers]:
    with HostileIndex(small_receive_buffer) as index, HostileIndex() as elsewhere:
        yield Servers(index, elsewhere)


def requires_login(route: Route, user: str = USER, password: str = PASSWORD) -> Route:
    """``route`` for requests with the right Basic credentials; 401 for the others."""

    def guarded(handler: Handler) -> None:
        if handler.credentials() != (user, password):
            answer(401, b"log in", headers={"WWW-Authenticate": 'Basic realm="index"'})(handler)
        else:
            route(handler)

    return guarded
