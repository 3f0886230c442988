"""Writing a wheel reproducibly and placing it atomically.

Each member is read once: hashed (RECORD), checksummed and deflated in the same pass
(``zipwriter``; large members in blocks on every core, ``compression.block_deflate``), in
constant memory whatever the size of a kernel's binaries. The
hashes are returned, so the checks that follow need not read the wheel again.
A *derived* member (the SBOM) is written after every other member, from the hashes
the writer already computed: listing a multi-GB binary's digest costs no second read.
Reproducible: members in the caller's order (sorted, dist-info last), one fixed
timestamp, fixed permissions, a fixed compressor and level.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ..errors import OutputExistsError
from ..kernel.arrival import ArrivalCancelled
from ..kernel.digest import file_sha256
from . import compression

# Re-exported: the writer's callers take and get these (wheel/members.py holds them).
from .members import Member as Member
from .members import WrittenMember as WrittenMember
from .members import WrittenWheel as WrittenWheel
from .members import record_hash as record_hash
from .members import record_text, writing_order
from .zipwriter import ZipWriter

ZIP_EPOCH_MIN = 315532800  # 1980-01-01: the earliest time a zip entry can hold
ZIP_EPOCH_MAX = 4354819198  # 2107-12-31 23:59:58: the latest
_CHUNK = 1 << 18  # small enough to stay in cache between hashing and deflating
_LARGE = 0xFFFFFFFF - (1 << 20)  # members near 4 GiB get zip64 headers up front


def zip_timestamp(epoch: int) -> tuple[int, int, int, int, int, int]:
    stamp = time.gmtime(min(max(epoch, ZIP_EPOCH_MIN), ZIP_EPOCH_MAX))
    return (stamp.tm_year, stamp.tm_mon, stamp.tm_mday, stamp.tm_hour, stamp.tm_min,
            stamp.tm_sec)


class Cancelled(Exception):
    """The run was interrupted while this wheel was being written."""


def _chunks(member: Member, digest: hashlib._Hash, read_size: int,
            cancel: threading.Event | None,
            on_bytes: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The member's bytes, hashed (and counted, for a progress bar) on the way through."""
    for chunk in _hashed(member, digest, read_size, cancel):
        if on_bytes is not None:
            on_bytes(len(chunk))
        yield chunk


def _hashed(member: Member, digest: hashlib._Hash, read_size: int,
            cancel: threading.Event | None) -> Iterator[bytes]:
    if member.source is None:
        data = member.content or b""
        digest.update(data)
        yield data
        return
    if member.arriving is not None:
        try:
            for chunk in member.arriving.chunks(read_size, cancel):
                digest.update(chunk)
                yield chunk
        except ArrivalCancelled:
            raise Cancelled(member.arcname) from None
        return
    with member.source.open("rb") as stream:
        while chunk := stream.read(read_size):
            if cancel is not None and cancel.is_set():
                raise Cancelled(member.arcname)
            digest.update(chunk)
            yield chunk


def write_wheel(path: Path, members: Iterable[Member], dist_info: str, epoch: int,
                level: int = compression.DEFAULT_LEVEL,
                cancel: threading.Event | None = None,
                slots: compression.DeflateSlots | None = None,
                on_bytes: Callable[[int], None] | None = None) -> WrittenWheel:
    """Write ``members`` (then RECORD) to ``path``; ``dist_info`` members go last.
    ``slots``: how many deflate blocks the run lets compress at once; ``on_bytes`` hears
    of every piece of a member read."""
    ordered = writing_order(members, dist_info)
    written: list[WrittenMember] = []
    derived: list[tuple[str, bytes]] = []
    with path.open("wb") as stream, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                               thread_name_prefix="kernel-wheels-deflate") as pool:
        compress = compression.block_deflate(level, pool, slots=slots)
        zf = ZipWriter(stream, zip_timestamp(epoch))
        for member in ordered:
            if member.derive is not None:
                content = member.derive(tuple(written))
                derived.append((member.arcname, content))
                member = Member(member.arcname, content=content, executable=member.executable)
            digest = hashlib.sha256()
            size = member.size
            # A large file is read a deflate block at a time: each read is handed to the
            # compressor's threads as it is, with no copy into a block of its own.
            read_size = compression.BLOCK if size > compression.BLOCK else _CHUNK
            mode = (0o755 if member.executable else 0o644) | 0o100000
            zf.add(member.arcname, _chunks(member, digest, read_size, cancel, on_bytes), mode=mode,
                   compress=compress, crc32=compression.crc32, large=size > _LARGE)
            # The size the zip writer counted: what was read, even if the file changed size.
            written.append(WrittenMember(member.arcname, digest.digest(), zf.entries[-1].size))
        record_name = f"{dist_info}/RECORD"
        record = record_text(written, dist_info)
        zf.add(record_name, [record.encode()], mode=0o100644,
               compress=compress, crc32=compression.crc32, large=False)
        zf.close()
    return WrittenWheel(path, tuple(written), record, tuple(derived))


@contextmanager
def staged_wheel(output_dir: Path, filename: str) -> Iterator[Path]:
    """A path for the wheel in a hidden folder inside the output folder (same file
    system, so the final rename is atomic); the folder is removed afterwards."""
    output_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".kernel-wheels-", dir=output_dir))
    try:
        yield folder / filename
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def place_wheel(temp: Path, final: Path, *, force: bool) -> str:
    """Move a finished wheel into place. Returns ``written``, ``replaced`` or ``unchanged``.

    An identical existing wheel is left alone; a different one is an error unless
    ``force``. The temp file is always gone afterwards.
    """
    try:
        if final.exists():
            if file_sha256(final) == file_sha256(temp):
                return "unchanged"
            if not force:
                raise OutputExistsError(
                    f"{final} exists with different content (use --force to replace it)")
            status = "replaced"
        else:
            status = "written"
        temp.chmod(0o644)
        os.replace(temp, final)
        return status
    finally:
        temp.unlink(missing_ok=True)
