"""Writing a wheel reproducibly and placing it atomically.

Members are streamed (constant memory, whatever the size of a kernel's binaries)
and hashed while written; ``wheel.wheelfile.WheelFile`` would read each member
into memory. RECORD follows the wheel spec. Reproducible: sorted members, one
fixed timestamp, fixed permissions, fixed deflate level.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import OutputExistsError

ZIP_EPOCH_MIN = 315532800  # 1980-01-01: the earliest time a zip entry can hold
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Member:
    arcname: str
    source: Path | None = None  # streamed from this file ...
    content: bytes | None = None  # ... or these bytes
    executable: bool = False


def zip_timestamp(epoch: int) -> tuple[int, int, int, int, int, int]:
    stamp = time.gmtime(max(epoch, ZIP_EPOCH_MIN))
    return stamp[:6]


def _record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _zipinfo(arcname: str, date_time: tuple[int, int, int, int, int, int],
             executable: bool) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(arcname, date_time)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix, so that permissions are honoured
    info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
    return info


def write_wheel(path: Path, members: Iterable[Member], dist_info: str, epoch: int) -> None:
    """Write ``members`` (then RECORD) to ``path``; ``dist_info`` members go last."""
    ordered = sorted(members, key=lambda m: (m.arcname.startswith(dist_info + "/"), m.arcname))
    date_time = zip_timestamp(epoch)
    records: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for member in ordered:
            info = _zipinfo(member.arcname, date_time, member.executable)
            digest = hashlib.sha256()
            size = 0
            large = member.source is not None and member.source.stat().st_size > 2**31
            with zf.open(info, "w", force_zip64=large) as out:
                stream = member.source.open("rb") if member.source else io.BytesIO(
                    member.content or b"")
                with stream:
                    while chunk := stream.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            records.append((member.arcname, _record_hash(digest.digest()), str(size)))
        record_name = f"{dist_info}/RECORD"
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerows(records)
        writer.writerow((record_name, "", ""))
        zf.writestr(_zipinfo(record_name, date_time, False), buffer.getvalue())


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


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
