"""HTTP with package indexes, which are treated as hostile.

- **Credentials go to their own origin only.** A :class:`Login` is bound to the
  origin (scheme, host, port) it was given for and is attached to a request only when
  the request's own URL has that origin: never to a host a page links to, a redirect
  points at or a file URL names. Redirects are followed here (for downloads only),
  hop by hop, each hop deciding afresh; a URL's own ``user:password@`` part is never
  used.
- **A transfer that crawls ends like one that stalled.** Every connection is measured
  in windows of ``timeout`` seconds, from the connect on, restarting with each new
  request on a kept-alive connection: a window in which fewer than
  ``timeout x MIN_RATE`` bytes moved (either way: the request, an upload, the answer)
  ends the request as timed out, and no single read or write may block past the end
  of its window. So a server that accepts and says nothing, trickles its headers or
  body, or reads an upload a byte at a time costs about one ``timeout`` per request
  (connect included); a transfer faster than ``MIN_RATE`` runs as long as it needs.
- **Answers are bounded**: a Simple API page above ``MAX_PAGE`` bytes, a file above
  ``MAX_FILE`` bytes, more than ``MAX_REDIRECTS`` redirects are refused; of an error
  answer, its first ``ERROR_TEXT`` bytes are read.
- **Every failure is one typed line**. What the server chose (a reason phrase, an error
  body, a ``Location``, a URL it listed or redirected to) goes through
  :func:`kernel_wheels.redaction.untrusted_lines`: shown only when no decoding of it
  holds a credential (upper case, entities, ``\\u`` escapes, hex, split lines...), else
  withheld whole. Our own URLs are shown with the secrets masked where they stand.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore2
import httpx2

from ..errors import IndexAuthenticationError, IndexServerError, UsageError
from ..network import NetworkSettings
from ..redaction import Secret, one_line, strip_userinfo, untrusted_line, untrusted_lines

DEFAULT_TIMEOUT = 60.0
#: Bytes per second a transfer must keep up, measured over each window of ``timeout``.
MIN_RATE = 64 * 1024
MAX_PAGE = 32 << 20
MAX_FILE = 16 << 30
MAX_REDIRECTS = 5
ERROR_TEXT = 16 << 10
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SEND_CHUNK = 64 << 10

Sink = Callable[[bytes], None]


def index_timeout(given: float | None = None) -> float:
    """``--timeout``, else ``KERNEL_WHEELS_TIMEOUT``, else :data:`DEFAULT_TIMEOUT`;
    checked (a finite number of seconds above 0)."""
    if given is None and not os.environ.get("KERNEL_WHEELS_TIMEOUT", "").strip():
        return DEFAULT_TIMEOUT
    return NetworkSettings.from_environment(given, 0).timeout


# --- origins and the credentials bound to one -----------------------------------------


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port: where a credential may go (RFC 6454)."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or _DEFAULT_PORTS.get(scheme, -1)
        except ValueError:  # a port out of range: an origin no login is ever bound to
            port = -1
        return cls(scheme, (parts.hostname or "").lower(), port)


@dataclass(frozen=True)
class Login:
    """A user name and password for one origin."""

    origin: Origin
    username: str
    password: Secret

    @classmethod
    def for_url(cls, url: str, username: str | None, password: str | None) -> Login | None:
        if username is None and password is None:
            return None
        return cls(Origin.of(url), username or "", Secret(password or ""))

    def auth_for(self, url: str) -> tuple[str, str] | None:
        """The Basic credentials for a request to ``url``: only on the login's origin."""
        return (self.username, self.password.reveal()) if Origin.of(url) == self.origin else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never show: the password and the pair a Basic header encodes; a
        user name without a password is a token (``https://TOKEN@host/simple``)."""
        password = self.password.reveal()
        if not password:
            return (self.username,) if self.username else ()
        return password, f"{self.username}:{password}"


# --- the minimum rate, at the socket ----------------------------------------------------


@dataclass(frozen=True)
class Pace:
    timeout: float = DEFAULT_TIMEOUT
    min_rate: float = MIN_RATE

    def describe(self) -> str:
        return (f"timed out (no answer, or under {self.min_rate / 1024:g} KiB/s, for "
                f"{self.timeout:g} s; --timeout)")


class _Window:
    """The progress of one connection, in consecutive windows of ``pace.timeout``."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self.need = pace.timeout * pace.min_rate
        self._restart()
        self.last_turn = "connect"

    def _restart(self) -> None:
        self.end = time.monotonic() + self.pace.timeout
        self.moved = 0

    def turn(self, direction: str) -> None:
        """A write after a read is the next request on a kept-alive connection: its
        windows start afresh (the time the connection idled in the pool is not a stall)."""
        if direction == "write" and self.last_turn == "read":
            self._restart()
        self.last_turn = direction

    def _roll(self, now: float, error: type[Exception]) -> None:
        while now >= self.end:
            if self.moved < self.need:
                raise error(self.pace.describe())
            self.end += self.pace.timeout
            self.moved = 0

    def budget(self, asked: float | None, error: type[Exception]) -> float:
        """How long the next read or write may block."""
        now = time.monotonic()
        self._roll(now, error)
        deadline = self.end if self.moved < self.need else self.end + self.pace.timeout
        left = deadline - now
        return left if asked is None else min(left, asked)

    def count(self, size: int, error: type[Exception]) -> None:
        self._roll(time.monotonic(), error)
        self.moved += size


class _PacedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream, window: _Window) -> None:
        self._inner = inner
        self._window = window

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._window.turn("read")
        budget = self._window.budget(timeout, httpcore2.ReadTimeout)
        try:
            data = self._inner.read(max_bytes, budget)
        except httpcore2.ReadTimeout:
            raise httpcore2.ReadTimeout(self._window.pace.describe()) from None
        self._window.count(len(data), httpcore2.ReadTimeout)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._window.turn("write")
        view = memoryview(buffer)
        sock = self._inner.get_extra_info("socket")
        # TLS inside TLS (an https proxy) has its own layer above the socket: only the
        # stream may write there. Everything else sends on the socket itself, so that
        # every send, not every buffer, gets what is left of the window.
        direct = isinstance(sock, socket.socket) and \
            not isinstance(self._inner.get_extra_info("ssl_object"), ssl.SSLObject)
        while view:
            budget = self._window.budget(timeout, httpcore2.WriteTimeout)
            if direct:
                sent = self._send(sock, view[:_SEND_CHUNK], budget)
            else:
                sent = min(len(view), _SEND_CHUNK)
                self._inner.write(bytes(view[:sent]), budget)
            self._window.count(sent, httpcore2.WriteTimeout)
            view = view[sent:]

    def _send(self, sock: socket.socket, data: memoryview, budget: float) -> int:
        try:
            sock.settimeout(budget)
            return sock.send(data)
        except TimeoutError:
            raise httpcore2.WriteTimeout(self._window.pace.describe()) from None
        except OSError as exc:
            raise httpcore2.WriteError(str(exc)) from None

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        budget = self._window.budget(timeout, httpcore2.ConnectTimeout)
        return _PacedStream(self._inner.start_tls(ssl_context, server_hostname, budget),
                            self._window)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _PacedBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend, pace: Pace) -> None:
        self._inner = inner
        self._pace = pace

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        window = _Window(self._pace)  # the connect is part of the first request's window
        budget = window.budget(timeout, httpcore2.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, budget, local_address, socket_options)
        return _PacedStream(stream, window)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        window = _Window(self._pace)
        budget = window.budget(timeout, httpcore2.ConnectTimeout)
        return _PacedStream(self._inner.connect_unix_socket(path, budget, socket_options), window)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@dataclass(frozen=True)
class Tls:
    """pip's --cert (a CA bundle to verify the index with) and --client-cert (a PEM file
    holding the client's certificate and key); None: the defaults."""

    cert: str | None = None
    client_cert: str | None = None

    def context(self) -> ssl.SSLContext | bool:
        if self.cert is None and self.client_cert is None:
            return True
        try:
            context = ssl.create_default_context(cafile=self.cert)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"--cert {self.cert}: cannot use it as a CA bundle: "
                             f"{_why(exc)}") from None
        if self.client_cert is not None:
            try:
                context.load_cert_chain(self.client_cert)
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(f"--client-cert {self.client_cert}: cannot use it (one PEM file "
                                 f"with the key and the certificate): {_why(exc)}") from None
        return context


def _why(exc: OSError | ssl.SSLError) -> str:
    return str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)


def _paced_transport(pace: Pace, proxy: str | None, tls: Tls | None = None) -> httpx2.HTTPTransport:
    """httpx2's transport, its connection pool using the paced network backend."""
    transport = httpx2.HTTPTransport(proxy=proxy, trust_env=True,
                                     verify=(tls or Tls()).context())
    pool: httpcore2.ConnectionPool = transport._pool
    if not isinstance(getattr(pool, "_network_backend", None), httpcore2.NetworkBackend):
        raise RuntimeError("httpx2's connection pool has no network backend to pace")
    pool._network_backend = _PacedBackend(pool._network_backend, pace)
    return transport


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxies.get(parts.scheme.lower()) or proxies.get("all")


def paced_client(pace: Pace, url: str, tls: Tls | None = None) -> httpx2.Client:
    """A client for requests to ``url``'s origin (through the environment's proxy for
    it): every connection paced, no redirect followed, nothing taken from the
    environment (``.netrc``) but the proxy. For other stores' requests (S3)."""
    return httpx2.Client(transport=_paced_transport(pace, _proxy_for(url), tls), trust_env=False,
                         timeout=httpx2.Timeout(pace.timeout), follow_redirects=False)


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """A page's answer: its text only when the status is 200 and it is no redirect."""

    url: str
    status: int
    content_type: str
    text: str

    @property
    def found(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class Answer:
    """An upload's answer, every text in it redacted and on one line."""

    status: int
    reason: str
    first_line: str
    location: str | None


def describe_http_error(exc: httpx2.HTTPError, pace: Pace) -> str:
    """A short reason for a transport error, without URLs (which could carry secrets);
    a timeout names ``pace``'s, the one the request ran under (never a default)."""
    if isinstance(exc, httpx2.ConnectError):
        reason = str(exc).lower()
        if "refused" in reason:
            return "connection refused (is the server running?)"
        if "name or service not known" in reason or "nodename" in reason or "resolve" in reason:
            return "unknown host"
        return "cannot connect"
    if isinstance(exc, httpx2.TimeoutException):
        return pace.describe()
    if isinstance(exc, httpx2.UnsupportedProtocol | httpx2.InvalidURL):
        return "not an http(s) URL"
    if isinstance(exc, httpx2.RemoteProtocolError | httpx2.DecodingError):
        return "not a valid HTTP answer"
    return type(exc).__name__


class IndexHttp:
    """The HTTP side of one index session. ``login`` goes only to its own origin."""

    def __init__(self, login: Login | None = None, pace: Pace | None = None,
                 accept: str | None = None, tls: Tls | None = None) -> None:
        self.login = login
        self.pace = pace or Pace()
        self.tls = tls or Tls()
        self._headers = {"Accept": accept} if accept else {}
        self._clients: dict[str | None, httpx2.Client] = {}

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.login.secrets if self.login else ()

    def show(self, text: str, limit: int = 300) -> str:
        """A URL of ours (given by the user, or built from one), fit for a message."""
        return one_line(text, self.secrets, limit)

    def untrusted(self, text: str, limit: int = 300) -> str:
        """A text the server chose (a reason phrase, a URL it listed or redirected to),
        fit for a message: withheld when any decoding of it holds a credential."""
        return untrusted_line(text, self.secrets, limit)

    def _label(self, url: str, theirs: bool) -> str:
        return self.untrusted(url) if theirs else self.show(url)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> IndexHttp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client(self, url: str) -> httpx2.Client:
        proxy = _proxy_for(url)
        if proxy not in self._clients:
            # trust_env=False: no proxy from the environment bypasses the paced
            # transport, and no .netrc adds credentials for other hosts.
            self._clients[proxy] = httpx2.Client(
                transport=_paced_transport(self.pace, proxy, self.tls), trust_env=False,
                timeout=httpx2.Timeout(self.pace.timeout), follow_redirects=False,
                headers=self._headers)
        return self._clients[proxy]

    def _auth(self, url: str) -> tuple[str, str] | None:
        return self.login.auth_for(url) if self.login else None

    @contextmanager
    def _open(self, method: str, url: str, *, theirs: bool = False,
              **kwargs: Any) -> Iterator[httpx2.Response]:
        """One request, its answer streamed; no redirect is followed. ``theirs``: the
        URL came from the server (a listing, a redirect), so its messages treat it so."""
        url = strip_userinfo(url)  # a URL's own user part is never sent
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise IndexServerError(f"{self._label(url, theirs)} is not an http(s) URL")
        try:
            client = self._client(url)
            request = client.build_request(method, url, **kwargs)
            response = client.send(request, auth=self._auth(url), stream=True)
        except httpx2.HTTPError as exc:
            raise IndexServerError(f"cannot reach {self._label(url, theirs)}: "
                                   f"{describe_http_error(exc, self.pace)}") from None
        try:
            yield response
        except httpx2.HTTPError as exc:
            raise IndexServerError(f"reading {self._label(url, theirs)} failed: "
                                   f"{describe_http_error(exc, self.pace)}") from None
        finally:
            response.close()

    def _refuse_status(self, response: httpx2.Response, url: str, allowed: Iterable[int],
                       theirs: bool = False) -> None:
        status = response.status_code
        if status in allowed:
            return
        if status in (401, 403):
            elsewhere = self.login is not None and self._auth(url) is None
            hint = " (it is not on the origin the credentials are for, so none were sent)" \
                if elsewhere else ": check the user name and password"
            raise IndexAuthenticationError(f"{self._label(url, theirs)} refused access "
                                           f"(HTTP {status}){hint}")
        raise IndexServerError(f"{self._label(url, theirs)} answered HTTP {status} "
                               f"{self.untrusted(response.reason_phrase, 80)}".rstrip())

    def _read(self, response: httpx2.Response, url: str, limit: int, what: str) -> bytes:
        chunks: list[bytes] = []
        self._stream(response, url, chunks.append, limit, what)
        return b"".join(chunks)

    def _stream(self, response: httpx2.Response, url: str, sink: Sink, limit: int,
                what: str, theirs: bool = False) -> None:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise IndexServerError(f"{self._label(url, theirs)}: the {what} is {int(declared)} "
                                   f"bytes, more than the {limit} accepted; refusing it")
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise IndexServerError(f"{self._label(url, theirs)}: the {what} is larger than "
                                       f"the {limit} bytes accepted; refusing it")
            sink(chunk)

    def page(self, url: str) -> Page:
        """GET a Simple API page; 404 and redirects come back unread (a redirect is
        pypiserver's way of sending an unknown project to its fallback index)."""
        with self._open("GET", url) as response:
            if response.status_code == 404 or response.is_redirect:
                return Page(url, response.status_code, "", "")
            self._refuse_status(response, url, (200,))
            body = self._read(response, url, MAX_PAGE, "page")
            content_type = response.headers.get("content-type", "")
            charset = response.charset_encoding or "utf-8"
        try:
            text = body.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            text = body.decode("utf-8", errors="replace")
        return Page(url, 200, content_type.split(";")[0].strip().lower(), text)

    def download(self, url: str, sink: Sink, limit: int = MAX_FILE, *, theirs: bool = False) -> None:
        """GET a file into ``sink``, following up to ``MAX_REDIRECTS`` redirects; each
        hop gets credentials only if it is on the login's origin. ``theirs``: ``url``
        came from the server (a listed file); every hop after the first does."""
        first, first_theirs = url, theirs
        for _hop in range(MAX_REDIRECTS + 1):
            with self._open("GET", url, theirs=theirs) as response:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise IndexServerError(f"{self._label(url, theirs)} redirects nowhere "
                                               f"(HTTP {response.status_code} without Location)")
                    url = strip_userinfo(urljoin(url, location)).partition("#")[0]
                    theirs = True
                    continue
                self._refuse_status(response, url, (200,), theirs)
                self._stream(response, url, sink, limit, "file", theirs)
                return
        raise IndexServerError(f"{self._label(first, first_theirs)}: more than {MAX_REDIRECTS} "
                               "redirects")

    def upload(self, url: str, data: dict[str, Any], files: dict[str, Any]) -> Answer:
        """POST a form; the answer is not followed anywhere."""
        with self._open("POST", url, data=data, files=files) as response:
            status = response.status_code
            text = b"" if status in (200, 201) else self._first_bytes(response)
            location = response.headers.get("location")
            reason = response.reason_phrase
        body = text.decode("utf-8", errors="replace").strip()
        lines = body.splitlines()
        # Judged with the whole body: a password split over its lines, or between the
        # reason phrase and the body, is found too; then none of them is shown.
        shown_reason, shown_location, first_line = untrusted_lines(
            [reason, location or "", lines[0] if lines else ""], self.secrets, [80, 300, 200],
            also=body)
        return Answer(status, shown_reason, first_line,
                      shown_location if location is not None else None)

    @staticmethod
    def _first_bytes(response: httpx2.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= ERROR_TEXT:
                break
        return b"".join(chunks)[:ERROR_TEXT]
