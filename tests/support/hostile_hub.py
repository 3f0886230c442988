"""A Hub-compatible server of our own that answers as an attacker wants (issue #18).

It speaks the four routes kernel-wheels uses (``/api/<type>s/<repo>/refs``,
``.../revision/<rev>``, ``.../tree/<rev>[/<path>]`` and ``/<prefix><repo>/resolve/<rev>/<path>``)
over a real socket on 127.0.0.1. By default it serves an honest, tiny kernel repository
(one pure-Python variant that converts and checks); every answer can be replaced by any
status, headers and body, so a test (or hypothesis) can give the converter garbage, lies
and traps: traversal paths, hostile commit ids, HTML where JSON belongs, wrong JSON types,
pagination links to other hosts, bodies that trickle. Every request is recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from .http_server import LoopbackServer

REPO = "evil/kernel"
COMMIT = "c0ffee" + "0" * 34
VARIANT = "torch-universal"
TAG = "v1.0.0"


def blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def honest_files() -> dict[str, bytes]:
    """A pure-Python kernel with metadata.json: converts and passes every check."""
    package = f"build/{VARIANT}/kernel"
    return {
        "README.md": b"---\nlicense: apache-2.0\n---\n# kernel\n",
        f"build/{VARIANT}/metadata.json": json.dumps({
            "name": "kernel", "id": "_kernel_universal", "version": 1, "license": "apache-2.0",
            "python-depends": [], "backend": {"type": "cpu"}}).encode(),
        f"{package}/__init__.py": b'"""A kernel."""\nVALUE = 1\n',
        f"{package}/_ops.py": b"ops = None\n",
    }


@dataclass
class Answer:
    """What one route answers: a status, headers and a body (or a callable that writes
    the body itself, for trickles)."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    writer: Callable[[BaseHTTPRequestHandler], None] | None = None

    @classmethod
    def json(cls, value: object, status: int = 200, **headers: str) -> Answer:
        return cls(status, json.dumps(value).encode(), {"Content-Type": "application/json", **headers})


@dataclass
class Repo:
    """The honest state a hostile answer is a variation of."""

    files: dict[str, bytes] = field(default_factory=honest_files)
    tags: dict[str, str] = field(default_factory=lambda: {TAG: COMMIT})
    branches: dict[str, str] = field(default_factory=lambda: {"main": COMMIT})
    commit: str = COMMIT

    def refs(self) -> Answer:
        def ref(kind: str, name: str, commit: str) -> dict[str, str]:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": commit}
        return Answer.json({"branches": [ref("heads", n, c) for n, c in self.branches.items()],
                            "tags": [ref("tags", n, c) for n, c in self.tags.items()],
                            "converts": []})

    def revision(self) -> Answer:
        return Answer.json({"id": REPO, "sha": self.commit, "lastModified": "2026-01-02T03:04:05.000Z",
                            "private": False})

    def tree_entries(self, folder: str, recursive: bool) -> list[dict[str, object]]:
        prefix = folder + "/" if folder else ""
        entries: dict[str, dict[str, object]] = {}
        for path, content in sorted(self.files.items()):
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):].split("/")
            for depth in range(1, len(rest)):
                sub = prefix + "/".join(rest[:depth])
                if recursive or depth == 1:
                    entries.setdefault(sub, {"type": "directory", "oid": "d" * 40, "size": 0, "path": sub})
            if recursive or len(rest) == 1:
                entries[path] = {"type": "file", "oid": blob_id(content), "size": len(content),
                                 "path": path}
        return list(entries.values())

    def tree(self, folder: str, recursive: bool) -> Answer:
        if folder and not any(p.startswith(folder + "/") for p in self.files):
            return Answer.json({"error": "not found"}, 404, **{"X-Error-Code": "EntryNotFound"})
        return Answer.json(self.tree_entries(folder, recursive))

    def file(self, path: str) -> Answer:
        if path not in self.files:
            return Answer.json({"error": "not found"}, 404, **{"X-Error-Code": "EntryNotFound"})
        content = self.files[path]
        return Answer(200, content, {"Content-Type": "application/octet-stream",
                                     "ETag": f'"{blob_id(content)}"', "X-Repo-Commit": self.commit})


_ROUTE = re.compile(r"^/api/(?P<type>kernel|model)s/(?P<repo>[^/]+/[^/]+)/"
                    r"(?:(?P<refs>refs)|revision/(?P<rev>[^/]+)|tree/(?P<tree_rev>[^/]+)(?:/(?P<folder>.*))?)$")
_RESOLVE = re.compile(r"^/(?:kernels/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
#: The organisation overview the kernels library reads ``trustedKernelPublisher`` from;
#: route ``overview:<org>``, honestly a 404 (no organisation of that name).
_OVERVIEW = re.compile(r"^/api/organizations/(?P<org>[^/]+)/overview$")


class HostileHub:
    """The server. ``override(route, answer)`` replaces what a route answers; routes are
    ``refs``, ``revision``, ``tree:<folder>`` (``tree:`` for the root) and
    ``file:<path>``; ``answers`` counts every answer given."""

    def __init__(self) -> None:
        self.repo = Repo()
        self.overrides: dict[str, Answer | Callable[[], Answer]] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.answers = 0
        self.release = threading.Event()  # ends every trickle at once
        self._lock = threading.Lock()
        self._server = LoopbackServer(self.handler())

    @property
    def endpoint(self) -> str:
        assert self._server.running
        return self._server.endpoint

    def reset(self, repo: Repo | None = None) -> None:
        with self._lock:
            self.repo = repo or Repo()
            self.overrides = {}
            self.requests = []

    def override(self, route: str, answer: Answer | Callable[[], Answer]) -> None:
        self.overrides[route] = answer

    def _answer(self, path: str, query: dict[str, list[str]]) -> Answer:
        if (match := _ROUTE.match(path)) is not None:
            if match["repo"] != REPO:
                return Answer.json({"error": "Repository not found"}, 404,
                                   **{"X-Error-Code": "RepoNotFound"})
            if match["refs"]:
                route, honest = "refs", self.repo.refs
            elif match["rev"]:
                route, honest = "revision", self.repo.revision
            else:
                folder = unquote(match["folder"] or "")
                recursive = query.get("recursive", ["False"])[0].lower() == "true"
                route, honest = f"tree:{folder}", lambda: self.repo.tree(folder, recursive)
        elif (match := _RESOLVE.match(path)) is not None:
            file_path = unquote(match["path"])
            route, honest = f"file:{file_path}", lambda: self.repo.file(file_path)
        elif (match := _OVERVIEW.match(path)) is not None:
            route, honest = f"overview:{match['org']}", lambda: Answer.json(
                {"error": "Organization not found"}, 404)
        else:
            return Answer.json({"error": "no such route"}, 404)
        given = self.overrides.get(route)
        if given is None:
            return honest()
        return given() if callable(given) else given

    def handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, each answer on a
                # kept-alive connection waits 40 ms for a delayed ACK.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                parts = urlsplit(self.path)
                with hub._lock:
                    hub.requests.append((parts.path, self.headers.get("Authorization")))
                    answer = hub._answer(parts.path, parse_qs(parts.query))
                    hub.answers += 1
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if answer.writer is not None:
                    self.send_header("Connection", "close")
                    self.end_headers()
                    with contextlib.suppress(OSError):  # the client gave up: what a trickle is for
                        answer.writer(self)
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_HEAD = do_GET  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self.release.set()
        self._server.stop()


@contextmanager
def hostile_hub() -> Iterator[HostileHub]:
    hub = HostileHub()
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def trickle(body: bytes, every: float, release: threading.Event) -> Callable[[BaseHTTPRequestHandler], None]:
    """A body writer that sends one byte every ``every`` seconds (until ``release``)."""
    def write(handler: BaseHTTPRequestHandler) -> None:
        for byte in body:
            if release.wait(every):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
    return write


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()
