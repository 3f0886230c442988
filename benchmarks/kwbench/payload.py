"""Real binary bytes for payloads: slices of torch's own libraries.

Compressors behave very differently on zeros, random bytes and machine code, so every
payload is cut from ``libtorch_cpu.so`` (434 MB of x86-64 code, tables and strings).
Slices start at least 1 MiB into the file, so none begins with an ELF header; a
payload larger than the usable part of the library is several slices back to back.
Different seeds start at different offsets, so every variant carries different bytes.
"""

from __future__ import annotations

from pathlib import Path

from .config import torch_lib

_SKIP = 1 << 20  # never start at (or near) the library's ELF header
_STRIDE = 5_303_459  # between seeds: a prime number of bytes, so slices do not align
_CHUNK = 1 << 22


def pool() -> Path:
    return torch_lib() / "libtorch_cpu.so"


def write_payload(dest: Path, size: int, seed: int) -> None:
    """Write ``size`` bytes of real library bytes to ``dest``; ``seed`` picks the offset."""
    source = pool()
    end = source.stat().st_size
    usable = end - _SKIP
    position = _SKIP + (seed * _STRIDE) % usable
    remaining = size
    with source.open("rb") as src, dest.open("wb") as out:
        src.seek(position)
        while remaining:
            chunk = src.read(min(_CHUNK, remaining, end - position))
            if not chunk:  # wrapped around: continue from the start of the usable part
                position = _SKIP + 4099  # an odd offset, so the next slice is another cut
                src.seek(position)
                continue
            out.write(chunk)
            position += len(chunk)
            remaining -= len(chunk)
