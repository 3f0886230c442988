"""The limit pass: read every byte of the given files once and deflate it, on all cores.

A lower bound for any converter that must read and compress every byte: no hashing,
no zip container, no checks. One task per file (a zip member is one deflate stream),
largest first, over a pool of one process per core.

    python -m benchmarks.kwbench.limit_pass --compressor zlib-ng:6 --files-from LIST [--jobs N]

Prints one JSON line: bytes read, bytes written, files.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

CHUNK = 1 << 20
RAW_DEFLATE = -15  # a zip member's deflate stream has no zlib header


class Compressor(Protocol):
    def compress(self, data: bytes, /) -> bytes: ...
    def flush(self, mode: int = ..., /) -> bytes: ...


def _zlib(level: int) -> Compressor:
    return zlib.compressobj(level, zlib.DEFLATED, RAW_DEFLATE)


def _zlib_ng(level: int) -> Compressor:
    from zlib_ng import zlib_ng

    return zlib_ng.compressobj(level, zlib_ng.DEFLATED, RAW_DEFLATE)


def _isal(level: int) -> Compressor:
    from isal import isal_zlib

    return isal_zlib.compressobj(level, isal_zlib.DEFLATED, RAW_DEFLATE)


FACTORIES: dict[str, Callable[[int], Compressor]] = {"zlib": _zlib, "zlib-ng": _zlib_ng, "isal": _isal}


def parse_compressor(spec: str) -> tuple[str, int]:
    """``"zlib-ng:6"`` -> ("zlib-ng", 6); a bare name means level 6 (isal: 2)."""
    name, _, level = spec.partition(":")
    if name not in FACTORIES:
        raise ValueError(f"unknown compressor {name!r}: one of {', '.join(FACTORIES)}")
    return name, int(level) if level else (2 if name == "isal" else 6)


def deflate_file(task: tuple[str, str, int]) -> tuple[int, int]:
    path, name, level = task
    compressor = FACTORIES[name](level)
    read = written = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            read += len(chunk)
            written += len(compressor.compress(chunk))
    written += len(compressor.flush())
    return read, written


def limit_pass(files: list[Path], spec: str, jobs: int) -> dict[str, int]:
    name, level = parse_compressor(spec)
    tasks = [(str(p), name, level) for p in sorted(files, key=lambda p: p.stat().st_size, reverse=True)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = list(pool.imap_unordered(deflate_file, tasks))
    return {"bytes_in": sum(r for r, _ in results), "bytes_out": sum(w for _, w in results),
            "files": len(files)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compressor", required=True, help="zlib:6, zlib-ng:6, isal:2, ...")
    parser.add_argument("--files-from", type=Path, required=True, help="one path per line")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    files = [Path(line) for line in args.files_from.read_text().splitlines() if line]
    print(json.dumps(limit_pass(files, args.compressor, args.jobs)))


if __name__ == "__main__":
    main()
