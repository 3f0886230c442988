"""The block-parallel deflate stream: one standard deflate stream whose bytes depend only
on the input, never on how it was read or how many threads compressed it."""

from __future__ import annotations

import random
import sys
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from zlib_ng import zlib_ng

from kernel_wheels.wheel import compression

BLOCK = compression.BLOCK


def real_bytes(size: int) -> bytes:
    """``size`` bytes of real machine code and data (the Python executable's library,
    repeated when it is shorter): what kernel binaries look like to deflate."""
    library = Path(sys.executable).resolve()
    candidates = sorted(library.parent.parent.glob("lib/libpython3*.so*")) or [library]
    data = candidates[0].read_bytes()
    return (data * (size // len(data) + 1))[:size]


def pieces(data: bytes, sizes: Iterator[int]) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        step = next(sizes)
        yield data[start:start + step]
        start += step


def chunkings(data: bytes) -> dict[str, list[bytes]]:
    rng = random.Random(len(data))
    return {
        "whole": [data],
        "blocks": list(pieces(data, iter(lambda: BLOCK, None))),
        "256 KiB": list(pieces(data, iter(lambda: 1 << 18, None))),
        "ragged": list(pieces(data, iter(lambda: rng.choice([1, 7, 4096, BLOCK - 3, BLOCK + 11]), None))),
    }


@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 5])
def test_the_stream_is_the_same_however_it_is_read_and_compressed(size: int) -> None:
    data = real_bytes(size)
    outputs = set()
    with ThreadPoolExecutor(max_workers=3) as pool:
        for executor in (None, pool):
            compress = compression.block_deflate(6, executor)
            assert compress is not None
            for name, chunks in chunkings(data).items():
                stream = b"".join(compress(iter(chunks)))
                assert zlib.decompress(stream, -15) == data, name
                outputs.add(stream)
    assert len(outputs) == 1  # same bytes: every chunking, with and without threads


def test_blocks_cost_next_to_nothing_in_size() -> None:
    """Each block starts from its predecessor's last 32 kB, so cutting the stream into
    blocks leaves it about as small as one-piece deflate by the same library."""
    data = real_bytes(3 * BLOCK + 12345)
    compress = compression.block_deflate(6, None)
    assert compress is not None
    blocked = len(b"".join(compress(iter([data]))))
    one_piece = zlib_ng.compressobj(6, zlib.DEFLATED, -15)
    whole = len(one_piece.compress(data) + one_piece.flush())
    assert blocked < whole * 1.01


def test_level_zero_stores() -> None:
    assert compression.block_deflate(0, None) is None


def test_deflate_slots_bound_the_run_until_lifted() -> None:
    """While a conversion still downloads, its wheels deflate at most ``limit`` blocks at
    once (the rest of the machine is the transfer's); once lifted, all at once. The bytes
    are the same either way."""
    data = real_bytes(6 * BLOCK + 123)
    slots = compression.DeflateSlots(1)
    inside, most = 0, 0
    count = threading.Lock()
    original = compression._deflate_block

    def counting(*args: object) -> bytes:
        nonlocal inside, most
        with count:
            inside += 1
            most = max(most, inside)
        try:
            return original(*args)  # type: ignore[arg-type]
        finally:
            with count:
                inside -= 1

    compression._deflate_block = counting  # type: ignore[assignment]
    try:
        with ThreadPoolExecutor(4) as pool:
            compress = compression.block_deflate(6, pool, slots=slots)
            assert compress is not None
            narrow = b"".join(compress(iter([data])))
            assert most == 1
            slots.lift()
            most = 0
            wide = b"".join(compress(iter([data])))
            assert most > 1
    finally:
        compression._deflate_block = original  # type: ignore[assignment]
    assert narrow == wide and zlib.decompress(narrow, -15) == data
