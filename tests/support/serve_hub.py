"""A Hub of our own for the abuse tests of `kernel-wheels serve`: a real HTTP server on
127.0.0.1 that speaks the part of the Hub API huggingface_hub uses for kernels, and that
answers what a hostile (or broken) Hub or mirror would.

What huggingface_hub asks (kernel repositories are ``kernels/``, models have no prefix
in file URLs):

- ``GET /api/{kernels|models}/{org}/{name}/refs``: ``{"branches": [...], "tags": [...],
  "converts": []}``, each ref ``{"name", "ref", "targetCommit"}``;
- ``GET /api/.../tree/{revision}/{path}`` (revision and path URL-quoted,
  ``?recursive=...``): a JSON list of ``{"type": "file", "path", "size", "oid"}`` and
  ``{"type": "directory", "path", "oid"}``;
- ``GET /api/.../revision/{revision}``: ``{"id", "sha", "lastModified"}``;
- ``GET|HEAD /[kernels/]{org}/{name}/resolve/{revision}/{path}``: the file's bytes, with
  ``ETag`` and ``X-Repo-Commit``;
- ``GET /api/kernels?author={org}`` and ``GET /api/models?author={org}`` (the author
  listings ``mirror --org`` asks; olah answers neither): ``[{"id", "modelId", "author"}]``,
  one page, of the repositories of that ``repo_type``;
- ``GET /api/organizations/{org}/overview`` (the publisher's trust, as ``kernels`` asks
  it): ``trustedKernelPublisher`` true for the organisations in ``trusted``, false for the
  others that own a repository, 404 for any other name.

A repository is a set of files served at every revision (by default a pure-Python
``torch-universal`` build: it converts in a moment, no compiler), with tags whose
commits are whatever the test says: a hostile Hub sends ``../../x`` as happily as a
commit id. :class:`Rule` values change answers: ``stall`` (read the request, answer
nothing until released), ``trickle`` (announce the answer, then send a byte at a time),
``raw`` (any status, type and body: HTML, garbage). Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from .http_server import LoopbackServer

LAST_MODIFIED = "2025-06-01T12:00:00.000Z"
_API = re.compile(r"/api/(?:kernels|models)/(?P<repo>[^/]+/[^/]+)/(?P<kind>refs|tree|revision)"
                  r"(?:/(?P<rev>[^/]+))?(?:/(?P<path>.*))?")
_RESOLVE = re.compile(r"/(?:kernels/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)")


def commit_of(text: str) -> str:
    """A well-formed commit id made from ``text``."""
    return hashlib.sha1(text.encode()).hexdigest()


def universal_files(value: int = 1) -> dict[str, bytes]:
    """A kernel whose only build is ``torch-universal`` (flat layout): pure Python."""
    return {"build/torch-universal/__init__.py": f"VALUE = {value}\n".encode()}


def _blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class HubRepo:
    tags: dict[str, object]
    files: dict[str, bytes] = field(default_factory=universal_files)
    branches: dict[str, object] = field(default_factory=dict)
    #: Which of the Hub's author listings names it: ``/api/kernels`` (the kernel repo
    #: type) or ``/api/models`` (kernels published as models, before that type).
    repo_type: str = "kernel"


@dataclass
class Rule:
    """An answer for requests whose ``"METHOD /path"`` (path as sent, still quoted)
    matches ``pattern``, from its ``after + 1``-th match on (for ``times`` matches, when
    given: a fault that passes)."""

    pattern: re.Pattern[str]
    action: str  # stall | trickle | raw
    status: int = 200
    content_type: str = "text/html"
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    after: int = 0
    times: int | None = None
    seen: int = 0


class HostileHub:
    """The server; ``with HostileHub() as hub:`` starts it, the end of the block
    releases every stall and stops it."""

    def __init__(self) -> None:
        self.repos: dict[str, HubRepo] = {}
        self.rules: list[Rule] = []
        self.requests: list[str] = []
        #: The Authorization header of each request, in order (None where there was none).
        self.authorizations: list[str | None] = []
        self.release = threading.Event()
        self.trickle_interval = 0.2
        #: Organisations the Hub marks as trusted kernel publishers.
        self.trusted: set[str] = set()
        self._lock = threading.Lock()
        self._server = LoopbackServer(_handler(self))

    # -- set-up ----------------------------------------------------------------------
    def add(self, repo_id: str, repo: HubRepo) -> HubRepo:
        self.repos[repo_id] = repo
        return repo

    def rule(self, pattern: str, action: str, **fields: object) -> Rule:
        rule = Rule(re.compile(pattern), action, **fields)  # type: ignore[arg-type]
        with self._lock:
            self.rules.append(rule)
        return rule

    @property
    def endpoint(self) -> str:
        assert self._server.running
        return self._server.endpoint

    def count(self, pattern: str) -> int:
        """Requests so far whose ``"METHOD /path"`` matches ``pattern``."""
        with self._lock:
            return sum(bool(re.search(pattern, line)) for line in self.requests)

    # -- running ---------------------------------------------------------------------
    def __enter__(self) -> HostileHub:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.stop()

    # -- answers ---------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        line = f"{h.command} {h.path}"
        with self._lock:
            self.requests.append(line)
            self.authorizations.append(h.headers.get("Authorization"))
            rule = next((r for r in self.rules if r.pattern.search(line) and self._take(r)), None)
        if rule is not None and rule.action == "stall":
            self.release.wait(600)
            h.close_connection = True
            return
        if rule is not None and rule.action == "raw":
            self._send(h, rule.status, rule.content_type, rule.body, body, rule.headers)
            return
        status, content_type, content, headers = self._answer(h.path)
        if rule is not None and rule.action == "trickle":
            self._trickle(h, status, content_type, content, headers)
            return
        self._send(h, status, content_type, content, body, headers)

    @staticmethod
    def _take(rule: Rule) -> bool:
        rule.seen += 1
        return rule.seen > rule.after and (rule.times is None or rule.seen <= rule.after + rule.times)

    def _answer(self, raw_path: str) -> tuple[int, str, bytes, dict[str, str]]:
        split = urlsplit(raw_path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        if split.path in ("/api/models", "/api/kernels"):  # the search: only the author filter
            kind = split.path.removeprefix("/api/").removesuffix("s")
            owned = [r for r, repo in sorted(self.repos.items())
                     if query.get("author") in (None, r.split("/")[0]) and repo.repo_type == kind]
            return _json([{"id": r, "modelId": r, "author": r.split("/")[0]} for r in owned])
        if (overview := re.fullmatch(r"/api/organizations/([^/]+)/overview", split.path)) is not None:
            org = unquote(overview[1])
            if not any(repo.split("/")[0] == org for repo in self.repos):
                return _not_found("RepoNotFound")
            return _json({"name": org, "fullname": org, "avatarUrl": "",
                          "trustedKernelPublisher": org in self.trusted})
        if (api := _API.fullmatch(split.path)) is not None:
            repo = self.repos.get(api["repo"])
            if repo is None:
                return _not_found("RepoNotFound")
            if api["kind"] == "refs":
                return _json({"branches": _refs(repo.branches, "heads"),
                              "tags": _refs(repo.tags, "tags"), "converts": []})
            revision = unquote(api["rev"] or "main")
            if api["kind"] == "revision":
                return _json({"id": api["repo"], "sha": revision, "lastModified": LAST_MODIFIED})
            return self._tree(repo, unquote(api["path"] or ""),
                              query.get("recursive", "").lower() == "true")
        if (resolve := _RESOLVE.fullmatch(split.path)) is not None:
            repo = self.repos.get(resolve["repo"])
            if repo is None:
                return _not_found("RepoNotFound")
            path = unquote(resolve["path"])
            if path not in repo.files:
                return _not_found("EntryNotFound")
            content = repo.files[path]
            return 200, "application/octet-stream", content, {
                "ETag": f'"{_blob_id(content)}"', "X-Repo-Commit": unquote(resolve["rev"])}
        return _not_found("RepoNotFound")

    @staticmethod
    def _tree(repo: HubRepo, path: str, recursive: bool) -> tuple[int, str, bytes, dict[str, str]]:
        prefix = path.rstrip("/") + "/" if path else ""
        entries: dict[str, dict[str, object]] = {}
        for name, content in sorted(repo.files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if recursive or "/" not in rest:
                entries[name] = {"type": "file", "path": name, "size": len(content),
                                 "oid": _blob_id(content)}
            else:
                folder = prefix + rest.split("/", 1)[0]
                entries[folder] = {"type": "directory", "path": folder, "oid": "0" * 40}
        if not entries:
            return _not_found("EntryNotFound")
        return _json(list(entries.values()))

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, content_type: str, content: bytes,
              body: bool, headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(content)))
            for name, value in (headers or {}).items():
                h.send_header(name, value)
            h.end_headers()
            if body:
                h.wfile.write(content)
        except OSError:
            h.close_connection = True

    def _trickle(self, h: BaseHTTPRequestHandler, status: int, content_type: str, content: bytes,
                 headers: dict[str, str]) -> None:
        """The whole answer, one byte per ``trickle_interval``, until released (then the
        connection is dropped): a Hub that is slow, not silent."""
        try:
            h.send_response(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(content)))
            for name, value in headers.items():
                h.send_header(name, value)
            h.end_headers()
            h.wfile.flush()
            for index in range(len(content)):
                if self.release.wait(self.trickle_interval):
                    break
                h.wfile.write(content[index:index + 1])
                h.wfile.flush()
        except OSError:
            pass
        h.close_connection = True


def _refs(refs: dict[str, object], kind: str) -> list[dict[str, object]]:
    return [{"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": commit}
            for name, commit in refs.items()]


def _json(value: object) -> tuple[int, str, bytes, dict[str, str]]:
    return 200, "application/json", json.dumps(value).encode(), {}


def _not_found(code: str) -> tuple[int, str, bytes, dict[str, str]]:
    return 404, "application/json", json.dumps({"error": code}).encode(), {"X-Error-Code": code}


def _handler(hub: HostileHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            hub._handle(self, body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            hub._handle(self, body=False)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def hostile_hub(**repos: HubRepo) -> Iterator[HostileHub]:
    """``hostile_hub(**{"org/name": HubRepo(...)})``."""
    with HostileHub() as hub:
        for repo_id, repo in repos.items():
            hub.add(repo_id, repo)
        yield hub


def wait_until(condition: object, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def port_of(endpoint: str) -> int:
    return int(urlsplit(endpoint).port or 80)


def closed(sock: socket.socket) -> bool:
    """Whether the peer closed ``sock`` (a read gives EOF or a reset), without blocking."""
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
