"""The deflate implementation wheels are compressed with.

zlib-ng (PyPI ``zlib-ng``, pinned in pyproject.toml) writes standard deflate streams that
every unzip and installer reads. Chosen after measuring 100 MB of ``libtorch_cpu.so`` on
one core of this project's CI machine: zlib level 6 21-30 MB/s, ratio 0.32; zlib-ng level
6 59-95 MB/s, ratio 0.33; ISA-L level 2 280 MB/s but ratio 0.36 (12% larger, over the 3%
the project allows against zlib 6). Level 6 by default: on the benchmark's kernels (48 MB
extensions carrying torch-library bytes) level 5 was about 20% faster, but its wheels
were 3.1% larger than zlib 6's at 64 variants (level 6: 2.8%). zlib-ng's
output is byte-identical for a given zlib-ng version, level and CPU architecture; like
zlib itself it does not promise the same bytes across versions or architectures
(docs/wheel-contract.md says so).
"""

from __future__ import annotations

import sys
import threading
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future

from zlib_ng import zlib_ng

from ..errors import UsageError
from .zipwriter import Compressor, CrcFunction

DEFAULT_LEVEL = 6
#: What wheels are compressed with by default (read by the benchmarks).
COMPRESSOR = f"zlib-ng:{DEFAULT_LEVEL}"
crc32: CrcFunction = zlib_ng.crc32
#: Raw bytes per independently compressed block of a member (below).
BLOCK = 4 << 20
_WINDOW = 32 << 10  # deflate's window: the dictionary each block starts with


def check_level(level: int) -> int:
    if not 0 <= level <= 9:
        raise UsageError(f"--compression {level}: a deflate level is 0 (store) to 9 (smallest)")
    return level


def _blocks(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    """(block, is the last one): the raw stream cut every BLOCK bytes, wherever the
    chunks happened to end (so the output never depends on read sizes). A chunk that is
    exactly one block, the writer's reads of a large file, is passed on without a copy."""
    buffer = bytearray()
    held: bytes | None = None
    for chunk in chunks:
        if not buffer and len(chunk) == BLOCK:
            if held is not None:
                yield held, False
            held = chunk
            continue
        buffer += chunk
        while len(buffer) >= BLOCK:
            if held is not None:
                yield held, False
            with memoryview(buffer) as view:
                held = bytes(view[:BLOCK])
            del buffer[:BLOCK]
    if held is not None:
        if not buffer:
            yield held, True
            return
        yield held, False
    yield bytes(buffer), True


def _deflate_block(block: bytes, dictionary: bytes, level: int, last: bool) -> bytes:
    compressor = (zlib_ng.compressobj(level, zlib.DEFLATED, -15, zdict=dictionary) if dictionary
                  else zlib_ng.compressobj(level, zlib.DEFLATED, -15))
    # A sync flush ends the block's output on a byte boundary without ending the stream,
    # so the blocks' outputs concatenate into one ordinary deflate stream.
    return compressor.compress(block) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class DeflateSlots:
    """How many blocks may be deflated at once, across all the wheels of a run. A
    conversion that is still downloading keeps a core free for the transfer (and, with
    a Hub mirror on the same machine, for the server): measured with olah on loopback,
    4 x 48 MB cold on 2 cores, deflating on both cores while downloading slowed the
    downloads by a third (6.5 s in all), on one core 5.5 s. ``lift`` removes the limit
    once the last download is over: then, as in a conversion that downloads nothing,
    every wheel's threads compress at once (a few more threads than cores keep both
    cores busy while a writer thread hashes and reads; a cap at the core count was
    measured 1.5% slower)."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._busy = 0
        self._changed = threading.Condition()

    def lift(self) -> None:
        with self._changed:
            self._limit = sys.maxsize
            self._changed.notify_all()

    @property
    def lifted(self) -> bool:
        with self._changed:
            return self._limit == sys.maxsize

    def __enter__(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._busy < self._limit)
            self._busy += 1

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self._busy -= 1
            self._changed.notify()


def _deflate_in_slot(slots: DeflateSlots | None, block: bytes, dictionary: bytes, level: int,
                     last: bool) -> bytes:
    if slots is None:
        return _deflate_block(block, dictionary, level, last)
    with slots:
        return _deflate_block(block, dictionary, level, last)


def block_deflate(level: int, pool: Executor | None, in_flight: int = 4,
                  slots: DeflateSlots | None = None) -> Compressor | None:
    """A member's raw deflate stream, compressed in BLOCK-sized blocks on ``pool``'s
    threads (zlib-ng releases the GIL), so that one large binary uses every core.

    Each block starts from the last 32 kB of the one before as its dictionary (as pigz
    does), so the stream is as small as a one-piece one give or take a few bytes per
    block, and it is the same bytes whatever the number of threads: the blocks are cut
    at fixed offsets and each is compressed from fixed input. None for level 0 (store).
    ``slots`` bounds how many blocks of the whole run are deflated at once.
    """
    if level == 0:
        return None

    def compress(chunks: Iterable[bytes]) -> Iterator[bytes]:
        pending: deque[Future[bytes]] = deque()
        previous = b""
        for block, last in _blocks(chunks):
            dictionary = previous[-_WINDOW:]
            if pool is None or (last and not pending):
                yield _deflate_in_slot(slots, block, dictionary, level, last)  # small: no hand-off
            else:
                pending.append(pool.submit(_deflate_in_slot, slots, block, dictionary, level, last))
                while len(pending) >= in_flight:
                    yield pending.popleft().result()
            previous = block
        while pending:
            yield pending.popleft().result()

    return compress
