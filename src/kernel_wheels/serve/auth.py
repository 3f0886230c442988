"""Optional HTTP basic authentication of clients, against an htpasswd file.

Why passlib's ``HtpasswdFile`` and not a check of our own: it reads every hash that
``htpasswd`` (Apache) and ``passlib`` write, apr1-MD5 (the ``htpasswd`` default),
SHA-256/512-crypt, bcrypt (with the ``bcrypt`` package) and the old ``{SHA}`` and crypt
forms, in constant time, so an existing file works as it is; a hand-written sha256 or
bcrypt check would accept one of them and invent a file format for it. The cost is an
unmaintained (but small, stable and widely used) package; it is imported only when
authentication is on. Hashes it cannot check here (bcrypt without the ``bcrypt``
package) are found at start-up, not on the first request.

Slow hashes are slow on purpose, and that cost must land on the attacker only:

- **No user-name oracle**: a user the file does not know is checked against a hash of
  the file's commonest scheme and cost (the result thrown away), so "no such user"
  takes as long as "wrong password".
- **Paid once per client**: pip and uv send the credentials with every request, so a
  verified pair is remembered for ``remember_seconds`` (and until the file changes),
  keyed by an HMAC with a random key of this process, never the password or an unkeyed
  hash of it. A remembered client is answered on the event loop at once: it waits for
  no thread and no hash.
- **In a pool of its own**: hashes are checked in a few separate *processes*, niced.
  Not threads: the ``crypt`` backend holds the GIL for the whole hash (sha512-crypt: a
  quarter of a second), which would stall the event loop, and every client with it.
  The password travels to them through a pipe, never on a command line.
- **Guessing is slowed**: after ``free_failures`` wrong answers from one address, each
  further check from it first waits, doubling up to ``max_delay`` (without holding a
  thread); the counters are bounded (``addresses``, least recently seen forgotten).

``/healthz`` is open to everyone (load balancers probe it); it gives details (kernel
names, Hub errors) only to an authenticated client when authentication is on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import hmac
import multiprocessing
import os
import secrets
import signal
import time
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ServeError, UsageError

REALM = "kernel-wheels"
OPEN_PATHS = frozenset({"/healthz"})
#: The file is looked at for changes at most this often (a stat, on the event loop).
_RELOAD_EVERY = 1.0


@dataclass(frozen=True)
class AuthLimits:
    remember_seconds: float = 600.0
    remembered: int = 4096
    free_failures: int = 5
    failure_window: float = 300.0
    first_delay: float = 0.25
    max_delay: float = 5.0
    addresses: int = 10_000
    hash_processes: int = max(1, min(4, (os.cpu_count() or 2) // 2))


def _htpasswd_class() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # passlib imports 'crypt'
        try:
            from passlib.apache import HtpasswdFile  # type: ignore[import-untyped]
        except ImportError:
            raise UsageError("authentication needs passlib: pip install 'passlib>=1.7.4'") from None
    return HtpasswdFile


def check_password(password: str, hashed: str) -> bool:
    """In a hash process: whether ``password`` matches ``hashed`` (any htpasswd scheme)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import htpasswd_context
    try:
        return bool(htpasswd_context.verify(password, hashed))
    except Exception:  # an entry edited into something unreadable
        return False


def _hash_process_start() -> None:
    """Hash processes leave Ctrl-C to the server (it stops them) and yield the CPU to it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(10)


class Users:
    """The users of an htpasswd file (or its text, from the environment)."""

    def __init__(self, path: Path | None = None, text: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        htpasswd = _htpasswd_class()
        self.path, self.clock = path, clock
        try:
            if path is not None:
                self._file = htpasswd(str(path))
            else:
                self._file = htpasswd.from_string(text or "")
        except (OSError, ValueError) as exc:
            where = str(path) if path else "the htpasswd text"
            raise ServeError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        self._looked_at = clock()
        self._check_hashes()
        self.dummy = self._commonest_hash()

    def _check_hashes(self) -> None:
        """Every entry's scheme is known and has a backend here (without hashing)."""
        users = self._file.users()
        if not users:
            raise ServeError("the htpasswd file has no users")
        for user in users:
            try:
                handler = self._file.context.identify(self.hash_of(user), resolve=True)
                if hasattr(handler, "has_backend") and not handler.has_backend():
                    raise ValueError(f"no backend for {handler.name}")
            except Exception as exc:  # passlib: ValueError for junk, MissingBackendError
                raise ServeError(f"the htpasswd entry of '{user}' cannot be checked here "
                                 f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); "
                                 "use apr1, sha512-crypt or install bcrypt") from None

    def _commonest_hash(self) -> str:
        """A hash of the scheme and cost most users have: what an unknown user's
        password is checked against, so that it costs what a known user's does."""
        costs: Counter[tuple[str, object]] = Counter()
        example: dict[tuple[str, object], str] = {}
        for user in self._file.users():
            hashed = self.hash_of(user)
            assert hashed is not None
            key = _cost(self._file.context, hashed)
            costs[key] += 1
            example.setdefault(key, hashed)
        return example[costs.most_common(1)[0][0]]

    def hash_of(self, user: str) -> str | None:
        """The user's hash as the file holds it (passlib gives bytes), None if unknown
        (also for a name no htpasswd file can hold: a NUL, a colon, a line break, more
        than 255 bytes, which passlib refuses with ValueError)."""
        try:
            found = self._file.get_hash(user)
        except ValueError:
            return None
        if found is None:
            return None
        return found.decode("utf-8", "surrogateescape") if isinstance(found, bytes) else str(found)

    def reload_if_changed(self) -> bool:
        """Read the file again if it changed (users added or removed without a restart),
        looking at most once a second; a file that cannot be read keeps the users it had."""
        if self.path is None or self.clock() - self._looked_at < _RELOAD_EVERY:
            return False
        self._looked_at = self.clock()
        try:
            changed = bool(self._file.load_if_changed())
        except (OSError, ValueError):
            return False
        if changed and self._file.users():
            self.dummy = self._commonest_hash()
        return changed


def _cost(context: Any, hashed: Any) -> tuple[str, object]:
    try:
        handler = context.identify(hashed, resolve=True)
        return handler.name, getattr(handler.from_string(hashed), "rounds", None)
    except Exception:  # checked at start-up; an entry edited since counts as its own kind
        return "unknown", None


class RememberedCredentials:
    """Verified (user, password) pairs for a while, by an HMAC under a key of this
    process: neither the password nor a hash someone could test guesses against is
    kept. Bounded in number (the oldest go first) and in time."""

    def __init__(self, lifetime: float, limit: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime, self.limit, self.clock = lifetime, limit, clock
        self._key = secrets.token_bytes(32)
        self._entries: OrderedDict[bytes, tuple[str, float]] = OrderedDict()

    def _digest(self, user: str, password: str) -> bytes:
        name = user.encode("utf-8", "surrogatepass")
        message = len(name).to_bytes(4, "big") + name + password.encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def known(self, user: str, password: str) -> bool:
        digest = self._digest(user, password)
        entry = self._entries.get(digest)
        if entry is None:
            return False
        if entry[0] != user or self.clock() >= entry[1]:
            del self._entries[digest]
            return False
        return True

    def add(self, user: str, password: str) -> None:
        self._entries[self._digest(user, password)] = (user, self.clock() + self.lifetime)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class _Failures:
    count: int
    last: float


class FailureThrottle:
    """Wrong passwords per client address: after ``free`` of them within ``window``
    seconds, each further check from that address waits first (doubling, bounded).
    At most ``limit`` addresses are kept; the least recently seen is forgotten first."""

    def __init__(self, limits: AuthLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits, self.clock = limits, clock
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def delay(self, address: str) -> float:
        failures = self._current(address)
        if failures is None or failures.count < self.limits.free_failures:
            return 0.0
        steps = min(failures.count - self.limits.free_failures, 32)
        return float(min(self.limits.max_delay, self.limits.first_delay * 2 ** steps))

    def failed(self, address: str) -> None:
        failures = self._current(address) or _Failures(0, 0.0)
        self._by_address[address] = _Failures(failures.count + 1, self.clock())
        self._by_address.move_to_end(address)
        while len(self._by_address) > self.limits.addresses:
            self._by_address.popitem(last=False)

    def _current(self, address: str) -> _Failures | None:
        failures = self._by_address.get(address)
        if failures is not None and self.clock() - failures.last > self.limits.failure_window:
            del self._by_address[address]
            return None
        return failures

    def __len__(self) -> int:
        return len(self._by_address)


class HashPool:
    """A few processes that check password hashes, started on first use."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_hash_process_start)
        return self._executor

    async def check(self, password: str, hashed: str) -> bool:
        loop = asyncio.get_running_loop()
        for _attempt in range(2):
            try:
                return await loop.run_in_executor(self._pool(), check_password, password, hashed)
            except BrokenProcessPool:  # a hash process was killed: start the pool again
                self._executor = None
        raise ServeError("the password checking processes keep dying")

    def warm(self) -> None:
        """Start the processes now, not on the first request that needs them."""
        pool = self._pool()
        for _ in range(self.processes):
            pool.submit(check_password, "", "")

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class Authenticator:
    """Decides whether a (user, password) pair from an address is valid, costing a slow
    hash only when the pair is not remembered."""

    def __init__(self, users: Users, limits: AuthLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.users = users
        self.limits = limits or AuthLimits()
        self.remembered = RememberedCredentials(self.limits.remember_seconds, self.limits.remembered,
                                                clock)
        self.throttle = FailureThrottle(self.limits, clock)
        self.hashes = HashPool(self.limits.hash_processes)

    async def verify(self, user: str, password: str, address: str) -> bool:
        if self.users.reload_if_changed():
            self.remembered.clear()  # users or passwords changed
        if self.remembered.known(user, password):
            return True
        if (wait := self.throttle.delay(address)) > 0:
            await asyncio.sleep(wait)
        hashed = self.users.hash_of(user)
        # An unknown user costs what a known one does: the same kind of hash is checked.
        matched = await self.hashes.check(password, hashed if hashed is not None else self.users.dummy)
        if matched and hashed is not None:
            self.remembered.add(user, password)
            return True
        self.throttle.failed(address)
        return False


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
    The authenticated user name is left in the scope's state for the access log (and
    for /healthz, which names kernels only to authenticated clients)."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["authentication"] = True
        header = next((value for name, value in scope["headers"] if name == b"authorization"),
                      None)
        credentials = basic_credentials(header)
        client = scope.get("client")
        address = client[0] if client else "unknown"
        if credentials is not None and await self.authenticator.verify(*credentials, address):
            state["user"] = credentials[0]
            await self.app(scope, receive, send)
            return
        if scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        body = b"authentication required\n" if credentials is None else \
            b"wrong user name or password\n"
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The hash processes start with the server and stop with it."""
        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.authenticator.hashes.warm()
            elif message["type"] == "lifespan.shutdown":
                self.authenticator.hashes.close()
            return message

        await self.app(scope, receiving, send)
