"""Running the application under uvicorn: the socket, the workers, the shutdown.

The socket is bound here, before uvicorn starts, so that a port in use is one line
(``kernel-wheels: error: cannot listen on ...``) and not a log record and exit status
3. One worker runs the application in this process; ``--workers N`` hands the socket
to uvicorn's supervisor, which starts N processes (each builds its own application
from the settings in the environment) and replaces any that dies.

Connections: a connection idle, or sending its request head, for ``--idle-timeout``
seconds is closed (:mod:`.connections`); the limit on open files is raised to the
system's hard limit, so that many idle clients exhaust neither the descriptors nor
the server.

Shutdown is uvicorn's: on SIGTERM or Ctrl-C it stops accepting connections and waits
for the requests in flight, conversions included, to finish; then the application's
lifespan ends. A process killed outright leaves its staging folder behind, which the
next start removes (its lock is free). Stopping on a signal is a normal end (exit 0).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from starlette.types import ASGIApp

from ..errors import ServeError
from .app import create_app, list_at_startup, load_users
from .cache import WheelCache
from .logs import EventLog, uvicorn_log_config
from .settings import HTPASSWD_VARIABLE, SETTINGS_VARIABLE, ServeSettings

if TYPE_CHECKING:
    import uvicorn


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that say they are TCP; without it, headers and body sent apart wait for a
    # delayed ACK, 40 ms per request on a keep-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} is in use on {host}: choose another with --port") from None
        if exc.errno == errno.EACCES and port < 1024:
            raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror} (a port below 1024 "
                             "needs privileges: choose another with --port)") from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (check --host "
                         "and --port)") from None
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def _signals_end_quietly() -> Iterator[None]:
    """uvicorn raises the stopping signal again after its graceful shutdown, under the
    handler that was there before it; a no-op there makes a stop on a signal exit 0
    instead of reaching the command line's "interrupted" path."""
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


#: Open files wanted (sockets included), when the hard limit allows.
_OPEN_FILES = 65536


def _raise_open_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, _OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _config(settings: ServeSettings, app: ASGIApp | str, factory: bool = False) -> uvicorn.Config:
    import uvicorn

    from .connections import DeadlineH11Protocol

    # No timeout_graceful_shutdown: a conversion in flight is finished, not cut.
    # timeout_keep_alive is also the deadline of every request head (DeadlineH11Protocol).
    return uvicorn.Config(app, factory=factory, workers=settings.workers, lifespan="on",
                          log_config=uvicorn_log_config(), access_log=False,
                          server_header=False, timeout_graceful_shutdown=None,
                          http=DeadlineH11Protocol,
                          timeout_keep_alive=settings.idle_timeout)  # type: ignore[arg-type]


def _check_kernels(settings: ServeSettings, events: EventLog) -> None:
    """A kernel that cannot be listed would be a 404 or 502 for every client: the server
    does not start (one line), unless --unlisted degraded asks to serve the others."""
    failures = list_at_startup(settings, events)
    if not failures:
        return
    if settings.unlisted == "degraded":
        for repo, why in failures.items():
            events.write("kernel-unlisted", repo=repo, reason=why, serving="the other kernels")
        return
    first = next(iter(failures.values()))
    more = f" (and {len(failures) - 1} more kernel(s))" if len(failures) > 1 else ""
    raise ServeError(f"{first}{more}: not starting; check the name, HF_ENDPOINT and HF_TOKEN, "
                     "or start with --unlisted degraded to serve the other kernels (/healthz "
                     "then says degraded)")


def run_server(settings: ServeSettings, events: EventLog | None = None,
               started: Callable[[str], None] | None = None) -> None:
    """Serve until stopped; ``started`` is called with the index's base URL once the
    kernels are listed and the socket listens (the CLI tells a person at a terminal)."""
    import uvicorn

    events = events or EventLog()
    users = load_users(settings)  # a bad htpasswd file: one line, before anything listens
    WheelCache(settings.cache, settings.cache_size, events).prepare()  # likewise the cache
    _raise_open_file_limit()
    sock = listen(settings.host, settings.port)  # a port in use is said before the Hub is asked
    try:
        _check_kernels(settings, events)
    except BaseException:
        sock.close()
        raise
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    events.write("start", url=f"http://{host}:{settings.port}/", workers=settings.workers,
                 kernels=[k.repo_id for k in settings.kernels], cache=str(settings.cache),
                 cache_limit=settings.cache_size, ttl=settings.ttl,
                 idle_timeout=settings.idle_timeout, conversions=settings.conversions,
                 authentication="htpasswd file" if settings.auth_file else
                 "htpasswd from the environment" if os.environ.get(HTPASSWD_VARIABLE) else "off")
    if started is not None:
        started(f"http://{host}:{settings.port}/")
    try:
        with _signals_end_quietly():
            if settings.workers == 1:
                server = uvicorn.Server(_config(settings, create_app(settings, events, users)))
                server.run(sockets=[sock])
                if not server.started:
                    raise ServeError("the server did not start (see the log above)")
            else:
                from uvicorn.supervisors import Multiprocess

                os.environ[SETTINGS_VARIABLE] = settings.to_json()
                config = _config(settings, "kernel_wheels.serve.app:app_from_environment",
                                 factory=True)
                Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
