"""Optional HTTP basic authentication of clients, against an htpasswd file.

Why passlib's ``HtpasswdFile`` and not a check of our own: it reads every hash that
``htpasswd`` (Apache) and ``passlib`` write, apr1-MD5 (the ``htpasswd`` default),
SHA-256/512-crypt, bcrypt (with the ``bcrypt`` package) and the old ``{SHA}`` and crypt
forms, in constant time, so an existing file works as it is; a hand-written sha256 or
bcrypt check would accept one of them and invent a file format for it. The cost is an
unmaintained (but small, stable and widely used) package; it is imported only when
authentication is on. Hashes it cannot check here (bcrypt without the ``bcrypt``
package) are found at start-up, not on the first request.

pip and uv send the credentials with every request (``https://user:password@host/...``
in the index URL, or a keyring / ``.netrc``), and slow hashes are slow on purpose, so a
verified user/password pair is remembered, as its sha256 only, until the file changes.
``/healthz`` is open to everyone (load balancers probe it); it tells nothing secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import warnings
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ServeError, UsageError

REALM = "kernel-wheels"
OPEN_PATHS = frozenset({"/healthz"})
_REMEMBERED = 4096


def _htpasswd_class() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # passlib imports 'crypt'
        try:
            from passlib.apache import HtpasswdFile  # type: ignore[import-untyped]
        except ImportError:
            raise UsageError("authentication needs passlib: pip install 'passlib>=1.7.4'") from None
    return HtpasswdFile


class Users:
    """The users of an htpasswd file (or its text, from the environment)."""

    def __init__(self, path: Path | None = None, text: str | None = None) -> None:
        htpasswd = _htpasswd_class()
        self.path = path
        try:
            if path is not None:
                self._file = htpasswd(str(path))
            else:
                self._file = htpasswd.from_string(text or "")
        except (OSError, ValueError) as exc:
            where = str(path) if path else "the htpasswd text"
            raise ServeError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        self._verified: dict[str, str] = {}  # sha256(user, password) -> user
        self._lock = threading.Lock()
        self._check_hashes()

    def _check_hashes(self) -> None:
        users = self._file.users()
        if not users:
            raise ServeError("the htpasswd file has no users")
        for user in users:
            try:
                self._file.check_password(user, "")
            except Exception as exc:  # passlib: MissingBackendError, ValueError for junk
                raise ServeError(f"the htpasswd entry of '{user}' cannot be checked here "
                                 f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); "
                                 "use apr1, sha512-crypt or install bcrypt") from None

    def _reloaded(self) -> bool:
        """Read the file again if it changed (users added or removed without a restart);
        a file that cannot be read now keeps the users it had."""
        try:
            return bool(self._file.load_if_changed())
        except (OSError, ValueError):
            return False

    def verify(self, user: str, password: str) -> bool:
        key = hashlib.sha256(f"{user}\0{password}".encode()).hexdigest()
        with self._lock:
            if self.path is not None and self._reloaded():
                self._verified.clear()  # users or passwords changed
            if self._verified.get(key) == user:
                return True
        try:
            ok = bool(self._file.check_password(user, password))
        except Exception:  # an entry edited into something unreadable
            return False
        if ok:
            with self._lock:
                if len(self._verified) >= _REMEMBERED:
                    self._verified.clear()
                self._verified[key] = user
        return ok


def basic_credentials(header: bytes | None) -> tuple[str, str] | None:
    if not header:
        return None
    scheme, _, encoded = header.decode("latin-1").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        text = decoded.decode("latin-1")
    user, colon, password = text.partition(":")
    return (user, password) if colon else None


class BasicAuth:
    """ASGI middleware: 401 unless the request carries a valid user and password.
    The authenticated user name is left in the scope's state for the access log."""

    def __init__(self, app: ASGIApp, users: Users) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = next((value for name, value in scope["headers"] if name == b"authorization"),
                      None)
        credentials = basic_credentials(header)
        if credentials is not None:
            from starlette.concurrency import run_in_threadpool

            # A slow hash must not stall the event loop.
            if await run_in_threadpool(self.users.verify, *credentials):
                scope.setdefault("state", {})["user"] = credentials[0]
                await self.app(scope, receive, send)
                return
        body = b"authentication required\n" if credentials is None else \
            b"wrong user name or password\n"
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
