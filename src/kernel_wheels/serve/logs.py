"""Structured logs: one JSON object per line on stderr, for requests and for events.

Every line has ``time`` (UTC, ISO 8601), ``event`` and ``pid`` (which ``--workers``
process wrote it). ``access`` lines carry method, path (never the query string),
status, bytes of body sent, duration in milliseconds, the client address and, with
authentication, the user name. Request headers are never logged, so neither the
``Authorization`` header nor a token can reach the log; Hub errors arrive here already
worded without tokens (``sources/hub.py``).

Each line is one ``write`` on the raw file descriptor: lines of several worker
processes sharing stderr never interleave.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..redaction import redact


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventLog:
    """Writes events as JSON lines to a file descriptor (default: stderr)."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stderr.fileno() if fd is None else fd

    def write(self, event: str, **fields: Any) -> None:
        record = {"time": _now(), "event": event, "pid": os.getpid(), **fields}
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        with contextlib.suppress(OSError):  # a closed stderr must not fail a request
            os.write(self.fd, line.encode())


class JsonFormatter(logging.Formatter):
    """uvicorn's own messages (start, stop, errors) in the same JSON-lines shape."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {"time": _now(), "event": "server", "pid": os.getpid(),
                                  "level": record.levelname.lower(),
                                  # a URL's user part masked (JSON escapes the controls)
                                  "message": redact(record.getMessage(), userinfo="***@")}
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            first = str(error).splitlines()[0][:300] if str(error) else ""
            fields["error"] = redact(f"{type(error).__name__}: {first}", userinfo="***@")
        return json.dumps(fields, separators=(",", ":"), default=str)


def uvicorn_log_config() -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn: JSON lines on stderr; its own access
    log is off (:class:`AccessLog` writes ours)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json",
                                "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
                    "uvicorn.error": {"level": "INFO"},
                    "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False}},
    }


def json_hub_logs() -> None:
    """huggingface_hub's log records (its warning that a request failed and is tried
    again) as JSON lines too: the server's stderr holds nothing else. Its logging module
    gives the library's logger a plain handler when it is first imported: imported here
    first, so that the handler is replaced, not joined by one later."""
    import huggingface_hub.utils.logging  # noqa: F401

    library = logging.getLogger("huggingface_hub")
    for handler in list(library.handlers):
        library.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    library.addHandler(handler)
    library.propagate = False


class AccessLog:
    """ASGI middleware: one ``access`` line per HTTP request, written when it ends
    (also when the client went away or the application failed)."""

    def __init__(self, app: ASGIApp, events: EventLog) -> None:
        self.app = app
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = {"status": 0, "bytes": 0}

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            client = scope.get("client")
            fields: dict[str, Any] = {
                "method": scope["method"], "path": scope["path"],
                "status": seen["status"] or 500, "bytes": seen["bytes"],
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "client": client[0] if client else None,
            }
            user = scope.get("state", {}).get("user")
            if user is not None:
                fields["user"] = user
            self.events.write("access", **fields)
