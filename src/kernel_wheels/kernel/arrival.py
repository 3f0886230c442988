"""A file still being downloaded, readable while it arrives.

A Hub source hands a variant to the converter as soon as its small files are in the
cache; each large file comes with an :class:`Arrival`, and the wheel writer reads (hashes,
deflates) its bytes as they land instead of waiting for the whole file. Measured cold,
4 x 48 MB through a mirror on loopback: waiting for whole files left the last variants'
compression after the last byte (0.6 s of a 4.8 s run); reading them as they arrive
leaves only the last block.

Nothing unverified ends up in a wheel: the reader gives out the last bytes only once the
download has checked the whole file against the listing (size, digest) and placed it in
the cache. If the transfer was cut or corrupted and is tried again, the reader raises
:class:`ArrivalRestarted`: the wheel is written again, from the finished file.

One side writes (``started``, ``received``, ``finished``, ``failed``: the downloader),
the other reads (``chunks``, ``wait``: the wheel writer), in different threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

_POLL = 0.1  # how often a waiting reader looks at its cancel event (seconds)


class ArrivalRestarted(Exception):
    """The transfer being read failed or started over: the bytes read so far may be wrong."""


class ArrivalCancelled(Exception):
    """The run was interrupted while waiting for bytes."""


class Arrival:
    def __init__(self, final: Path, size: int) -> None:
        #: Where the verified file will be (the cache's snapshot path).
        self.final = final
        #: Its size, from the listing.
        self.size = size
        self._changed = threading.Condition()
        self._partial: Path | None = None  # the file the current attempt writes
        self._attempt = 0
        self._received = 0
        self._outcome: bool | None = None  # True: verified and placed; False: given up

    # -- the downloader's side ------------------------------------------------------
    def started(self, partial: Path) -> None:
        """A transfer begins writing ``partial`` (again, after a failed try)."""
        with self._changed:
            self._partial, self._received = partial, 0
            self._attempt += 1
            self._changed.notify_all()

    def received(self, total: int) -> None:
        """``total`` bytes of the current attempt are written to ``partial`` (flushed)."""
        with self._changed:
            self._received = total
            self._changed.notify_all()

    def finished(self) -> None:
        """The file is verified and at :attr:`final`."""
        with self._changed:
            self._outcome = True
            self._changed.notify_all()

    def failed(self) -> None:
        """No more tries: the file will not arrive."""
        with self._changed:
            self._outcome = False
            self._changed.notify_all()

    # -- the reader's side ----------------------------------------------------------
    @property
    def over(self) -> bool:
        """The download has ended, one way or the other."""
        with self._changed:
            return self._outcome is not None

    def wait(self, cancel: threading.Event | None = None) -> bool:
        """Block until the download is over; True if the file is at :attr:`final`."""
        with self._changed:
            while self._outcome is None:
                self._check(cancel)
                self._changed.wait(_POLL)
            return self._outcome

    def chunks(self, read_size: int, cancel: threading.Event | None = None) -> Iterator[bytes]:
        """The file's bytes in ``read_size`` pieces as they arrive; the last ones only once
        the whole file is verified. Raises :class:`ArrivalRestarted` when the transfer
        being read fails or starts over."""
        with self._changed:
            while self._partial is None and self._outcome is None:
                self._check(cancel)
                self._changed.wait(_POLL)
            if self._partial is None:  # nothing was downloaded here: the file was there
                partial, attempt = None, 0
            else:
                partial, attempt = self._partial, self._attempt
        if partial is None:
            yield from self._finished_file(read_size)
            return
        try:
            # Opened while the transfer runs: the open file survives its rename into the cache.
            stream = partial.open("rb")
        except FileNotFoundError:  # the transfer was over (or had failed) before the open
            if self.wait(cancel) and self._attempt == attempt:
                yield from self._finished_file(read_size)
                return
            raise ArrivalRestarted(self.final.name) from None
        with stream:
            position = 0
            while position < self.size:
                want = min(read_size, self.size - position)
                with self._changed:
                    while True:
                        if self._attempt != attempt or self._outcome is False:
                            raise ArrivalRestarted(self.final.name)
                        if self._received >= position + want and (
                                position + want < self.size or self._outcome is True):
                            break
                        self._check(cancel)
                        self._changed.wait(_POLL)
                chunk = stream.read(want)
                if len(chunk) != want:  # cannot happen unless the file was changed under us
                    raise ArrivalRestarted(self.final.name)
                position += want
                yield chunk

    def _finished_file(self, read_size: int) -> Iterator[bytes]:
        if self._outcome is not True:
            raise ArrivalRestarted(self.final.name)
        with self.final.open("rb") as stream:
            while chunk := stream.read(read_size):
                yield chunk

    @staticmethod
    def _check(cancel: threading.Event | None) -> None:
        if cancel is not None and cancel.is_set():
            raise ArrivalCancelled()
