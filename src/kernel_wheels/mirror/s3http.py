"""boto3's HTTP requests through the paced transport, so that an S3 store is bounded as an
index server is.

botocore's own HTTP layer applies a timeout to each socket read: a store that answers a
byte every few seconds, or accepts an upload a byte at a time, never trips it, and its
default (60 s, five tries) let a stalled store keep a run silent for six minutes. Its
``before-send`` event lets a handler answer a request instead: here every request goes
through :mod:`kernel_wheels.remote.transport`'s paced client (a window of ``--timeout``
seconds in which at least ``timeout x MIN_RATE`` bytes must move, either way, from the
connect on), and a failure comes back as botocore's own connection errors, so that
botocore retries it ``--retries`` times and the caller gets one line.

An answer botocore reads whole (a listing page, an error) is refused above
:data:`MAX_ANSWER` bytes; an object's body is streamed, and :class:`~.store.S3Destination`
bounds what it reads of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx2

from ..network import MIN_RATE, NetworkSettings
from ..remote.transport import Pace, Tls, describe_http_error, paced_client

#: The most bytes of an answer botocore reads whole (a listing page is about 300 kB).
MAX_ANSWER = 16 << 20
_CHUNK = 64 << 10


class AnswerTooLarge(Exception):
    """An answer above :data:`MAX_ANSWER` bytes."""


class _Body:
    """An answer's body as botocore reads it (``stream()`` for a whole answer,
    ``read(amt)`` for an object's body), its bytes as they came (no decoding: the
    length and checksums botocore verifies are of these)."""

    def __init__(self, response: httpx2.Response, pace: Pace) -> None:
        self._response, self._pace = response, pace
        self._chunks: Iterator[bytes] = response.iter_raw(_CHUNK)
        self._buffer = b""
        self._done = False

    def _next(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self._done = True
            self.close()
            return b""
        except httpx2.HTTPError as exc:
            self.close()
            raise _botocore_error(exc, str(self._response.request.url), self._pace) from None

    def stream(self, amt: int = _CHUNK, decode_content: bool = False) -> Iterator[bytes]:
        size = 0
        while chunk := self.read(amt):
            size += len(chunk)
            if size > MAX_ANSWER:
                self.close()
                raise AnswerTooLarge(f"an answer larger than {MAX_ANSWER} bytes")
            yield chunk

    def read(self, amt: int | None = None) -> bytes:
        if amt is None:
            parts = [self._buffer]
            self._buffer = b""
            while not self._done and (chunk := self._next()):
                parts.append(chunk)
            return b"".join(parts)
        while len(self._buffer) < amt and not self._done:
            self._buffer += self._next()
        data, self._buffer = self._buffer[:amt], self._buffer[amt:]
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._response.close()


def _botocore_error(exc: httpx2.HTTPError, url: str, pace: Pace) -> Exception:
    """botocore's exception for a transport failure (which its retries know), its
    reason naming the run's own timeout (``pace``)."""
    from botocore import exceptions

    reason = describe_http_error(exc, pace)
    kind: Any = exceptions.ConnectionClosedError  # botocore is untyped here
    if isinstance(exc, httpx2.ConnectTimeout):
        kind = exceptions.ConnectTimeoutError
    elif isinstance(exc, httpx2.TimeoutException):
        kind = exceptions.ReadTimeoutError
    elif isinstance(exc, httpx2.ConnectError):
        kind = exceptions.EndpointConnectionError
    error: Exception = kind(endpoint_url=url, error=reason)
    return error


def _content(body: Any) -> bytes | Iterator[bytes] | None:
    if body is None or isinstance(body, bytes | bytearray):
        return bytes(body) if body is not None else None
    if isinstance(body, str):
        return body.encode()

    def chunks() -> Iterator[bytes]:
        while data := body.read(_CHUNK):
            yield data.encode() if isinstance(data, str) else data

    return chunks()


class PacedSender:
    """The ``before-send`` handler of one boto3 client."""

    def __init__(self, network: NetworkSettings) -> None:
        self.pace = Pace(network.timeout, MIN_RATE)
        self.tls = Tls(cert=os.environ.get("AWS_CA_BUNDLE") or None)
        self._clients: dict[str, httpx2.Client] = {}

    def _client(self, url: str) -> httpx2.Client:
        origin = str(httpx2.URL(url).copy_with(path="/", query=None, fragment=None))
        if origin not in self._clients:
            self._clients[origin] = paced_client(self.pace, url, self.tls)
        return self._clients[origin]

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        # botocore's headers as they are (they are signed), less Expect (httpx sends the
        # body at once; Expect is never signed); the body's bytes as they are stored.
        headers = [(str(k), v.decode("latin-1") if isinstance(v, bytes) else str(v))
                   for k, v in request.headers.items() if str(k).lower() != "expect"]
        if not any(k.lower() == "accept-encoding" for k, _ in headers):
            headers.append(("Accept-Encoding", "identity"))
        client = self._client(request.url)
        try:
            sent = client.build_request(request.method, request.url, headers=headers,
                                        content=_content(request.body))
            response = client.send(sent, stream=True)
        except httpx2.HTTPError as exc:
            raise _botocore_error(exc, request.url, self.pace) from None
        return AWSResponse(request.url, response.status_code, dict(response.headers.items()),
                           _Body(response, self.pace))


def pace_client(client: Any, network: NetworkSettings) -> Any:
    """``client`` (boto3's S3 client), its requests sent through the paced transport."""
    client.meta.events.register("before-send.s3", PacedSender(network))
    return client
