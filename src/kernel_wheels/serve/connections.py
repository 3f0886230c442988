"""Connections that send nothing, or only part of a request head, are closed.

uvicorn's ``timeout_keep_alive`` starts only when a response is complete, and any byte
received cancels it: a connection that sends nothing after connecting, or sends a few
bytes of a request head and then nothing (slowloris), is never timed out, and each one
holds a socket and its buffers for ever. :class:`DeadlineH11Protocol` gives every
request head a deadline: armed when the connection opens and again after each response,
cleared only when a whole request head has arrived, and not moved by the bytes of a
head trickling in. A request being answered (a conversion may take minutes) is never
cut; the deadline applies only while the server waits for the next head.

The deadline is uvicorn's ``timeout_keep_alive`` (``--idle-timeout``), so an idle
keep-alive connection and a half-sent head end alike. The h11 implementation is used
(pure Python, always installed with uvicorn); httptools, when present, is not.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class DeadlineH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_deadline = float(self.timeout_keep_alive)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._waiting_for_head():
            self._disarm()  # a whole head arrived: the request is being answered

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._arm()  # the next head has its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_deadline, self._expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        if not self._waiting_for_head() or self.transport.is_closing():
            return
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()
