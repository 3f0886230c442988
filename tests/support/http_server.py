"""The one threaded HTTP server of the tests' own servers (a stand-in for the Hub's
error answers, a hostile index, a hostile Hub, a fault-injecting proxy, a hostile S3
store, an archive mirror, a folder with content negotiation): ``http.server`` in a thread
of the test's process, serving each connection in a daemon thread of its own.

It listens on 127.0.0.1 only, at a port from the suite's scheme (``helpers.free_port``:
below the kernel's ephemeral range, a slice per pytest-xdist worker, so that no outgoing
connection of pip, uv or another worker can hold the port, even between a ``stop`` and a
``start`` on the same port). ``start`` returns once the socket listens and the serving
thread runs, a condition, not a delay; ``stop`` (or the end of the ``with`` block) ends
the serving loop, closes the socket and joins the thread. Handlers that wait (stalls,
trickles) are the owner's to release before stopping, as each owner does.

Servers that are programs of their own stay programs (olah, pypiserver, devpi, moto,
serve, and ``python -m http.server`` for a static site, as the README runs it)."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .helpers import free_port

#: How often the serving loop looks for a stop: the most a ``stop`` waits.
_POLL_SECONDS = 0.05


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler never keeps the test's process alive
    #: The object that runs the server (a hostile index, a proxy): what a handler reads
    #: its routes and rules from, as ``self.server.owner``.
    owner: Any = None


class LoopbackServer:
    """``handler`` served on 127.0.0.1 (at ``port``, or a free one) until stopped."""

    def __init__(self, handler: Callable[..., BaseHTTPRequestHandler], *, owner: Any = None,
                 port: int | None = None, receive_buffer: int | None = None) -> None:
        self._handler = handler
        self._owner = owner
        self._receive_buffer = receive_buffer
        self._fixed_port = port
        self.port = port or 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``, no trailing slash (HF_ENDPOINT's form)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT/``: a base URL to join paths to."""
        return self.endpoint + "/"

    def url(self, path: str) -> str:
        return self.endpoint + path

    def start(self) -> LoopbackServer:
        if self._server is not None:
            raise RuntimeError("the server is running already")
        self._server = self._bind()
        self.port = self._server.server_address[1]
        serving = threading.Event()

        def serve(server: _Server) -> None:
            serving.set()
            server.serve_forever(poll_interval=_POLL_SECONDS)

        self._thread = threading.Thread(target=serve, args=(self._server,), daemon=True,
                                        name=f"test-http-{self.port}")
        self._thread.start()
        serving.wait()  # the socket listens already: connections queue until it serves
        return self

    def _bind(self) -> _Server:
        """Bind a port of the scheme; another one when a port found free was taken in the
        moment before the bind (by another test run on this machine), unless the port
        was given (a restart on the same port)."""
        for _ in range(20):
            port = self._fixed_port or free_port()
            server = _Server(("127.0.0.1", port), self._handler, bind_and_activate=False)
            server.owner = self._owner
            if self._receive_buffer is not None:
                # Inherited by accepted sockets: an upload fills the buffers quickly and
                # then moves only as fast as the handler reads.
                server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            try:
                server.server_bind()
                server.server_activate()
            except OSError as exc:
                server.server_close()
                if exc.errno != errno.EADDRINUSE or self._fixed_port:
                    raise
                continue
            return server
        raise RuntimeError("no free port for a test server")

    def stop(self) -> None:
        """Stop serving and close the socket (a connection to the port is then refused);
        :meth:`start` may listen again, on the same port."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()
        self._fixed_port = self.port  # a restart listens where clients were pointed

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
