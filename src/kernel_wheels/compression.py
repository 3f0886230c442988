"""The deflate implementation wheels are compressed with.

zlib-ng (PyPI ``zlib-ng``, pinned in pyproject.toml) writes standard deflate streams that
every unzip and installer reads. Chosen after measuring 100 MB of ``libtorch_cpu.so`` on
one core of this project's CI machine: zlib level 6 21-30 MB/s, ratio 0.32; zlib-ng level
6 59-95 MB/s, ratio 0.33; ISA-L level 2 280 MB/s but ratio 0.36 (12% larger, over the 3%
the project allows against zlib 6). Level 5 by default: on a realistic kernel (four 48 MB
extensions carrying torch-library bytes) zlib-ng 5 was 23% faster than zlib-ng 6 and its
wheels 2.1% larger than zlib 6's (level 6: 1.9%; level 4: 3.6%, too large). zlib-ng's
output is byte-identical for a given zlib-ng version, level and CPU architecture; like
zlib itself it does not promise the same bytes across versions or architectures
(docs/wheel-contract.md says so).
"""

from __future__ import annotations

import zlib

from zlib_ng import zlib_ng

from .errors import UsageError
from .zipwriter import CrcFunction, Deflater

DEFAULT_LEVEL = 5
#: What wheels are compressed with by default (read by the benchmarks).
COMPRESSOR = f"zlib-ng:{DEFAULT_LEVEL}"
crc32: CrcFunction = zlib_ng.crc32


def check_level(level: int) -> int:
    if not 0 <= level <= 9:
        raise UsageError(f"--compression {level}: a deflate level is 0 (store) to 9 (smallest)")
    return level


def deflater(level: int) -> Deflater | None:
    """A raw deflate stream (as zip members hold) at ``level``; None for 0 (stored)."""
    if level == 0:
        return None
    return zlib_ng.compressobj(level, zlib.DEFLATED, -15)
