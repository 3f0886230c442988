"""A small deterministic zip writer: the archive format of wheels, written in one
streaming pass per member.

Why not ``zipfile``: a wheel member must be read once and, in that one pass, hashed
(sha256 for RECORD), checksummed (CRC-32 for the zip) and deflated with the compressor
kernel-wheels chose (``wheel/compression.py``), which ``zipfile`` cannot be given. Everything
that could vary between machines is fixed here: member order is the caller's, every
timestamp is the one given, permissions come from the caller, no extra fields except
zip64 sizes where a member needs them, no archive comment.

Format: APPNOTE.TXT 6.3 (local headers whose sizes are patched after the data, the
central directory, zip64 records when sizes or offsets need them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_ZIP64_END = struct.Struct("<IQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<IIQI")
_ZIP64_EXTRA_TAG = 0x0001
_MAX32 = 0xFFFFFFFF
_MAX16 = 0xFFFF
_UNIX = 3
_DEFLATED, _STORED = 8, 0
_UTF8_FLAG = 0x800


class Compressor(Protocol):
    """Raw deflate output, in order, for a member's raw chunks."""

    def __call__(self, chunks: Iterable[bytes], /) -> Iterator[bytes]: ...


@dataclass(frozen=True)
class Entry:
    """What the central directory needs to know of a member already written."""

    name: bytes
    flags: int
    method: int
    dos_time: int
    dos_date: int
    crc: int
    compressed: int
    size: int
    offset: int
    mode: int


def dos_date_time(date_time: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time
    return ((year - 1980) << 9 | month << 5 | day), (hour << 11 | minute << 5 | second // 2)


def _encode(name: str) -> tuple[bytes, int]:
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), _UTF8_FLAG


def _zip64_extra(*values: int) -> bytes:
    return struct.pack("<HH", _ZIP64_EXTRA_TAG, 8 * len(values)) + struct.pack(
        f"<{len(values)}Q", *values)


class ZipWriter:
    """Write members one after the other to a seekable binary stream."""

    def __init__(self, stream: BinaryIO, date_time: tuple[int, int, int, int, int, int]) -> None:
        self.stream = stream
        self.dos_date, self.dos_time = dos_date_time(date_time)
        self.entries: list[Entry] = []

    def add(self, name: str, chunks: Iterable[bytes], *, mode: int, compress: Compressor | None,
            crc32: CrcFunction, large: bool) -> None:
        """Write one member from ``chunks``; ``compress`` None stores it. ``large``:
        the member may exceed 4 GiB, so its local header gets zip64 fields up front."""
        encoded, flags = _encode(name)
        method = _DEFLATED if compress is not None else _STORED
        offset = self.stream.tell()
        extra = _zip64_extra(0, 0) if large else b""
        version = 45 if large else 20
        self.stream.write(_LOCAL.pack(0x04034B50, version, flags, method, self.dos_time,
                                      self.dos_date, 0, _MAX32 if large else 0,
                                      _MAX32 if large else 0, len(encoded), len(extra)))
        self.stream.write(encoded)
        self.stream.write(extra)
        crc = size = compressed = 0

        def raw() -> Iterator[bytes]:
            nonlocal crc, size
            for chunk in chunks:
                crc = crc32(chunk, crc)
                size += len(chunk)
                yield chunk

        write = self.stream.write
        for out in (compress(raw()) if compress is not None else raw()):
            compressed += len(out)
            write(out)
        if not large and (size > _MAX32 or compressed > _MAX32):
            raise ValueError(f"{name} grew past 4 GiB while it was being written")
        end = self.stream.tell()
        # Sizes are known only now: patch them into the local header.
        self.stream.seek(offset + 14)
        if large:
            self.stream.write(struct.pack("<III", crc, _MAX32, _MAX32))
            self.stream.seek(offset + _LOCAL.size + len(encoded) + 4)
            self.stream.write(struct.pack("<QQ", size, compressed))
        else:
            self.stream.write(struct.pack("<III", crc, compressed, size))
        self.stream.seek(end)
        self.entries.append(Entry(encoded, flags, method, self.dos_time, self.dos_date, crc,
                                  compressed, size, offset, mode))

    def close(self) -> None:
        """Write the central directory and the end records."""
        start = self.stream.tell()
        for entry in self.entries:
            # When any field overflows, all three go to the zip64 extra field (each header
            # field that reads 0xFFFFFFFF has its value there, in this order).
            needs64 = entry.size > _MAX32 or entry.compressed > _MAX32 or entry.offset > _MAX32
            values = [entry.size, entry.compressed, entry.offset] if needs64 else []
            extra = _zip64_extra(*values) if values else b""
            version = 45 if values else 20
            self.stream.write(_CENTRAL.pack(
                0x02014B50, _UNIX << 8 | version, version, entry.flags, entry.method,
                entry.dos_time, entry.dos_date, entry.crc,
                _MAX32 if values else entry.compressed, _MAX32 if values else entry.size,
                len(entry.name), len(extra), 0, 0, 0, entry.mode << 16,
                _MAX32 if values else entry.offset))
            self.stream.write(entry.name)
            self.stream.write(extra)
        end = self.stream.tell()
        count, size = len(self.entries), end - start
        if count > _MAX16 or size > _MAX32 or start > _MAX32:
            self.stream.write(_ZIP64_END.pack(0x06064B50, _ZIP64_END.size - 12, _UNIX << 8 | 45, 45,
                                              0, 0, count, count, size, start))
            self.stream.write(_ZIP64_LOCATOR.pack(0x07064B50, 0, end, 1))
            self.stream.write(_END.pack(0x06054B50, 0, 0, min(count, _MAX16), min(count, _MAX16),
                                        min(size, _MAX32), min(start, _MAX32), 0))
        else:
            self.stream.write(_END.pack(0x06054B50, 0, 0, count, count, size, start, 0))


class CrcFunction(Protocol):
    def __call__(self, data: bytes, value: int = ..., /) -> int: ...
