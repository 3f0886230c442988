"""What an index needs from one wheel, read in one pass, and the wheel's check.

:func:`inspect_wheel` is what the site runs on every wheel it has not seen before
(in worker processes: the manylinux check uses auditwheel, which changes the working
directory): the file's sha256 and size, its METADATA bytes (served as the PEP 658
``.metadata`` file) with their sha256, Requires-Python, and the verdict of
:func:`kernel_wheels.checks.check_wheel`.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name, parse_wheel_filename

from ..errors import IndexConflictError, UsageError
from ..kernel.digest import file_sha256
from ..kernel.gpu_archs import GpuCode
from ..provenance.record import VERIFIED_FILE, Verification
from ..reading import open_regular, read_regular
from ..wheel.gpu_record import GPU_RECORD, MAX_RECORD, gpu_code_from, read_gpu_record
from ..wheel.variant_label import split_variant_label

if TYPE_CHECKING:
    from ..provenance import Policy

_CHUNK = 1 << 20
_IN_MEMORY = 16 << 20  # smaller wheels are read once into memory


@dataclass(frozen=True)
class WheelFacts:
    filename: str
    project: str  # normalised name
    version: str
    sha256: str
    size: int
    requires_python: str | None
    metadata_sha256: str
    #: The index pages' provenance summary (``_provenance``, docs/provenance.md), from
    #: the wheel's verified record once its check (provenance re-verified) passed.
    provenance: dict[str, Any] | None = None
    #: The CUDA device code its record says (``check`` proved it): for the JSON pages.
    gpu_code: GpuCode | None = None

    def to_json(self) -> list[object]:
        return [self.project, self.version, self.sha256, self.size, self.requires_python,
                self.metadata_sha256, self.provenance,
                self.gpu_code.to_dict() if self.gpu_code else None]

    @classmethod
    def from_json(cls, filename: str, row: list[object]) -> WheelFacts:
        project, version, sha256, size, requires_python, metadata_sha256, *rest = row
        assert isinstance(size, int) and len(rest) <= 2
        provenance = rest[0] if rest and isinstance(rest[0], dict) else None
        gpu_code = gpu_code_from(rest[1]) if len(rest) > 1 else None
        return cls(filename, str(project), str(version), str(sha256), size,
                   None if requires_python is None else str(requires_python),
                   str(metadata_sha256), provenance, gpu_code)


@dataclass(frozen=True)
class Inspection:
    """The result of :func:`inspect_wheel`: facts and METADATA, or why it was refused."""

    path: Path
    facts: WheelFacts | None
    metadata: bytes | None
    refusal: str | None
    #: Where the copy of the wheel was written, when one was asked for.
    copy: Path | None = None


def _read_and_copy(path: Path, copy_to: Path | None) -> tuple[str, int, zipfile.ZipFile]:
    """sha256 and size of ``path`` and an open archive, copying the bytes to ``copy_to``
    in the same pass."""
    size = path.stat().st_size
    if size <= _IN_MEMORY:
        # A FIFO or device in a wheel's place: a ValueError (one line), never a hang.
        content = read_regular(path, "the wheel", ValueError, _IN_MEMORY)
        if copy_to is not None:
            copy_to.write_bytes(content)
        return hashlib.sha256(content).hexdigest(), len(content), \
            zipfile.ZipFile(io.BytesIO(content))
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, "the wheel", ValueError, None) as stream, \
            (copy_to.open("wb") if copy_to is not None else io.BytesIO()) as out:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if copy_to is not None:
                out.write(chunk)
    return digest.hexdigest(), size, zipfile.ZipFile(copy_to or path)


def read_facts(path: Path, copy_to: Path | None = None) -> tuple[WheelFacts, bytes]:
    """sha256, size and METADATA of a wheel, reading it once (and copying it to
    ``copy_to`` in the same pass). Raises ValueError, KeyError, OSError or
    zipfile.BadZipFile for a file that is not a readable wheel."""
    facts, metadata, archive = _open_facts(path, copy_to)
    archive.close()
    return facts, metadata


def _open_facts(path: Path, copy_to: Path | None) -> tuple[WheelFacts, bytes, zipfile.ZipFile]:
    """:func:`read_facts`, and the archive, still open, for the check to read."""
    name, version, _, _ = parse_wheel_filename(split_variant_label(path.name)[0])
    sha256, size, archive = _read_and_copy(path, copy_to)
    try:
        members = [n for n in archive.namelist()
                   if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(members) != 1:
            raise ValueError("no single .dist-info/METADATA in the wheel")
        metadata = archive.read(members[0])
        recorded = f"{members[0].split('/')[0]}/{VERIFIED_FILE}"
        record = Verification.from_text(archive.read(recorded).decode("utf-8", "replace")) \
            if recorded in archive.namelist() else None
        gpu_code = _gpu_code(archive, members[0].split("/")[0])
    except BaseException:
        archive.close()
        raise
    headers = BytesHeaderParser().parsebytes(metadata)
    requires_python = headers.get("Requires-Python")
    facts = WheelFacts(path.name, canonicalize_name(name), str(version), sha256, size,
                       str(requires_python).strip() if requires_python else None,
                       hashlib.sha256(metadata).hexdigest(),
                       record.summary() if record is not None else None, gpu_code)
    return facts, metadata, archive


def _gpu_code(archive: zipfile.ZipFile, dist_info: str) -> GpuCode | None:
    """The wheel's GPU record, if it has one (a record that lies fails the check)."""
    try:
        info = archive.getinfo(f"{dist_info}/{GPU_RECORD}")
    except KeyError:
        return None
    return read_gpu_record(archive.read(info)) if info.file_size <= MAX_RECORD else None


def inspect_wheel(path: Path, copy_to: Path | None = None, policy: Policy | None = None) -> Inspection:
    """Facts and check of one wheel; never raises for a bad wheel. With ``copy_to``,
    the wheel is also copied there while it is read (and the check reads the archive
    that pass opened, not the file a second time). Its provenance is re-verified under
    ``policy`` (default: the kernels library's), so the summary an index shows is one
    that verified."""
    from ..checks import judge_wheel
    from ..provenance import Policy

    try:
        facts, metadata, archive = _open_facts(path, copy_to)
    except (ValueError, KeyError, zipfile.BadZipFile, OSError) as exc:
        return Inspection(path, None, None, f"unreadable wheel: {exc}")
    with archive:
        report = judge_wheel(path, archive=archive, policy=policy or Policy())
    if not report.passed:
        return Inspection(path, None, None, report.first_failure())
    return Inspection(path, facts, metadata, None, copy_to)


def collect_wheels(inputs: Iterable[Path]) -> list[Path]:
    """Wheel files given directly or found (not recursively) in given folders."""
    found: dict[str, Path] = {}
    for given in inputs:
        if given.is_dir():
            paths = sorted(p for p in given.iterdir() if p.suffix == ".whl" and p.is_file())
        elif given.is_file():
            if given.suffix != ".whl":
                raise UsageError(f"{given} is not a wheel (.whl)")
            paths = [given]
        else:
            raise UsageError(f"{given} does not exist")
        for path in paths:
            other = found.setdefault(path.name, path)
            if other != path and file_sha256(other) != file_sha256(path):
                raise IndexConflictError(f"{path.name} is given twice with different content "
                                         f"({other} and {path})")
    return list(found.values())
