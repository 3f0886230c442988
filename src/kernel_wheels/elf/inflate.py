"""Compressed device code, inflated within bounds by well-kept libraries, never by hand:
nvcc 13 compresses fat binary entries with LZ4 (its block format: PyPI ``lz4``) or zstd,
clang's offload bundler compresses a HIP bundle (``CCOB``) with zstd or zlib. zstd is the
standard library's ``compression.zstd`` from Python 3.14, its backport before.

The container states the inflated size; it is believed only within two bounds, checked
before anything is inflated: at most :data:`MAX_INFLATED` bytes, and at most
:data:`MAX_RATIO` times the compressed size. The output is then cut at the stated size,
and a stream that gives more or fewer bytes, or does not end, is malformed. So a hostile
entry costs at most the stated size in memory and the time to produce it, and a section
of many entries at most :data:`MAX_INFLATED_PER_SECTION` in all (:class:`Budget`).

The bounds, from the 21,014 fat binary entries of torch 2.14.1+cu130 and the NVIDIA
libraries it installs (cuDNN, cuBLAS, NCCL, ...): the largest entry is 136 MB inflated
(an NCCL cubin), the highest ratio 207 (a libtorch_cuda cubin); the bounds leave room
for kernels eight and five times beyond those.
"""

from __future__ import annotations

import sys
import zlib

from .layout import ElfError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

__all__ = ["MAX_INFLATED", "MAX_INFLATED_PER_SECTION", "MAX_RATIO", "Budget", "InflateError", "inflate",
           "inflate_prefix"]

MAX_INFLATED = 1 << 30
MAX_RATIO = 1024
MAX_INFLATED_PER_SECTION = 4 << 30
METHODS = ("lz4", "zstd", "zlib")


class InflateError(ElfError):
    """A compressed payload that does not inflate to what its container says (one line)."""


class Budget:
    """The bytes one section's payloads may inflate to in all."""

    def __init__(self, limit: int = MAX_INFLATED_PER_SECTION) -> None:
        self.left = limit

    def spend(self, declared: int, what: str) -> None:
        # The payload's own bound first: its error names the payload's claim, the more
        # specific of the two.
        _check_declared(declared, what)
        if declared > self.left:
            raise InflateError(f"{what} would take its section's compressed payloads past "
                               f"{MAX_INFLATED_PER_SECTION} inflated bytes in all")
        self.left -= declared


def inflate(data: bytes, method: str, declared: int, what: str) -> bytes:
    """``data`` inflated with ``method`` to exactly ``declared`` bytes. ``what`` names
    the payload in the error (``pkg/x.so: the sm_80 cubin of its fat binary``)."""
    out, used = inflate_prefix(data, method, declared, what)
    if used != len(data):
        raise InflateError(f"{what} has {len(data) - used} bytes after its compressed stream")
    return out


def inflate_prefix(data: bytes, method: str, declared: int, what: str) -> tuple[bytes, int]:
    """The stream at the start of ``data`` (zstd or zlib, which mark their own end)
    inflated to exactly ``declared`` bytes, and how many bytes of ``data`` it took."""
    _check_declared(declared, what)
    if declared > MAX_RATIO * len(data):
        raise InflateError(f"{what} says {len(data)} compressed bytes inflate to {declared}, "
                           f"more than {MAX_RATIO} times as many")
    try:
        if method == "lz4":
            out = _lz4(data, declared), len(data)
        elif method == "zstd":
            out = _stream(zstd.ZstdDecompressor(), data, declared)
        elif method == "zlib":
            out = _stream(zlib.decompressobj(), data, declared)
        else:
            raise InflateError(f"{what} is compressed with {method}, which is not one of "
                               f"{', '.join(METHODS)}")
    except (zstd.ZstdError, zlib.error, ValueError, OverflowError) as exc:
        raise InflateError(f"{what} does not inflate ({method}: {_reason(exc)})") from None
    if out[0] is None:
        raise InflateError(f"{what} does not inflate to the {declared} bytes it says ({method})")
    return out[0], out[1]


def _check_declared(declared: int, what: str) -> None:
    if not 0 < declared <= MAX_INFLATED:
        raise InflateError(f"{what} says it inflates to {declared} bytes (the bound is "
                           f"{MAX_INFLATED})")


def _lz4(data: bytes, declared: int) -> bytes | None:
    import lz4.block  # only when an entry is LZ4-compressed (nvcc's -compress-mode=speed)

    try:
        # The output buffer is the declared size, and the block must fill it exactly.
        out: bytes = lz4.block.decompress(data, uncompressed_size=declared)
    except lz4.block.LZ4BlockError:
        return None
    return out if len(out) == declared else None


def _stream(decompressor: zstd.ZstdDecompressor | zlib._Decompress, data: bytes,
            declared: int) -> tuple[bytes | None, int]:
    # One byte more than declared: a stream that would give more is found out, and the
    # memory stays bounded by the declared size.
    out: bytes = decompressor.decompress(data, declared + 1)
    if len(out) != declared or not decompressor.eof:
        return None, 0
    return out, len(data) - len(decompressor.unused_data)


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
