"""What the checks look at, gathered once: :class:`WheelContents`.

Two ways to get them: :func:`read_wheel_contents` reads an existing wheel in one pass
(every member inflated once: hashed against RECORD, binaries copied to a scratch
folder for the ELF reader); :func:`written_wheel_contents` takes what the writer computed
while writing (``to-wheel``), so a fresh wheel is never read back.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
import zlib
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..kernel.layout import is_binary_name
from ..provenance.record import VERIFIED_FILE
from ..reading import parse_json
from ..wheel.gpu_record import GPU_RECORD
from ..wheel.metadata import PROVENANCE_FILE
from ..wheel.sbom import SBOM_FOLDER, SBOM_NAME
from ..wheel.variant_label import VARIANT_JSON
from .report import Finding, Status

if TYPE_CHECKING:  # types only: checking a wheel never loads the writer
    from ..wheel.writer import Member, WrittenWheel

#: The dist-info texts the checks read, by their path inside the dist-info folder.
SBOM_TEXT = f"{SBOM_FOLDER}/{SBOM_NAME}"
#: Declares the commands an installer writes into ``bin/`` (checks/members.py refuses them).
ENTRY_POINTS = "entry_points.txt"
_TEXTS = ("METADATA", "WHEEL", PROVENANCE_FILE, SBOM_TEXT, VARIANT_JSON, ENTRY_POINTS, VERIFIED_FILE,
          GPU_RECORD)
#: A variant folder's signed files (``<module>/<variant>/<name>``), kept as bytes for
#: the provenance check: the signature is over these exact bytes.
SIGNED_NAMES = ("metadata.json", "metadata.json.sigstore")
_CHUNK = 1 << 20
_MAX_TEXT = 16 << 20  # a METADATA or provenance record larger than this is not read
_BINARY_IN_MEMORY = 16 << 20  # binaries up to this size are checked from memory
#: What reading a damaged archive or member raises (a bad deflate stream is zlib.error,
#: an unknown zip version NotImplementedError, an encrypted member RuntimeError).
UNREADABLE = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
              zlib.error, NotImplementedError, RuntimeError)


@dataclass
class WheelContents:
    filename: str
    #: Every file member (directory entries left out), in archive order.
    members: list[str]
    #: The dist-info folder holding METADATA, if there is one.
    dist_info: str | None
    #: dist-info texts by their path in the dist-info folder (METADATA, WHEEL,
    #: kernel_wheels.json, sboms/kernel-wheels.cdx.json).
    texts: dict[str, str] = field(default_factory=dict)
    #: sha256 (raw) of every member's content (RECORD aside: :attr:`record_sha256`).
    hashes: dict[str, bytes] = field(default_factory=dict)
    #: Every member's size (uncompressed), by name.
    sizes: dict[str, int] = field(default_factory=dict)
    #: Binaries (by member name) as files on disk, for the binary checks.
    #: (small ones as bytes: most index wheels hold a binary of a few kB, and a scratch
    #: file per wheel would cost more than checking it)
    binaries: dict[str, Path | bytes] = field(default_factory=dict)
    #: Findings made while gathering (RECORD problems, unreadable members).
    findings: list[Finding] = field(default_factory=list)
    #: The wheel file itself.
    path: Path | None = None
    #: metadata.json and its bundle of each variant folder, by member name (bytes).
    signed: dict[str, bytes] = field(default_factory=dict)
    #: sha256 (raw) of RECORD as the wheel holds it.
    record_sha256: bytes | None = None

    @property
    def provenance(self) -> dict[str, Any] | None:
        text = self.texts.get(PROVENANCE_FILE)
        if text is None:
            return None
        try:
            value = parse_json(text)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def _text_name(dist_info: str | None, arcname: str) -> str | None:
    """The path inside the dist-info folder of a text the checks read, else None."""
    if dist_info is None or not arcname.startswith(dist_info + "/"):
        return None
    inside = arcname[len(dist_info) + 1:]
    return inside if inside in _TEXTS else None


def is_signed_name(arcname: str) -> bool:
    return arcname.count("/") == 2 and arcname.rsplit("/", 1)[1] in SIGNED_NAMES


def _find_dist_info(members: Iterable[str]) -> str | None:
    return next((m.split("/")[0] for m in members
                 if m.count("/") == 1 and m.endswith(".dist-info/METADATA")), None)


def _record_rows(text: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for row in csv.reader(io.StringIO(text)):
        if row:
            rows[row[0]] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    return rows


def _record_digest(value: str) -> bytes | None:
    algorithm, _, encoded = value.partition("=")
    if algorithm != "sha256" or not encoded:
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except ValueError:
        return None


def _open_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    """``zf.open(info)``, inflated by zlib-ng (the compressor the writer uses, a
    dependency already) instead of the standard library's zlib: about twice as fast, and
    inflating is most of checking a large wheel. zipfile still parses the headers and
    checks the size and CRC-32; only its decompressor object is swapped, before anything
    is read (``ZipExtFile._decompressor``, there since Python 3.3; kept as is if absent)."""
    member = zf.open(info)
    if info.compress_type == zipfile.ZIP_DEFLATED and info.compress_size >= _CHUNK \
            and hasattr(member, "_decompressor"):  # a small member: not worth importing zlib-ng
        from zlib_ng import zlib_ng

        member._decompressor = zlib_ng.decompressobj(-15)
    return member


def read_wheel_contents(path: Path, filename: str, scratch: Callable[[], Path],
                     archive: zipfile.ZipFile | None = None) -> WheelContents:
    """Read the wheel at ``path`` once; binaries are copied into the folder ``scratch()``
    gives. ``archive``: the wheel already open (the caller closes it). Raises
    ``zipfile.BadZipFile``/``ValueError`` for an archive that cannot be read at all."""
    with nullcontext(archive) if archive is not None else zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        names = [i.filename for i in infos]
        facts = WheelContents(filename, names, _find_dist_info(names), path=path)
        record_name = f"{facts.dist_info}/RECORD" if facts.dist_info else None
        record: dict[str, tuple[str, str]] | None = None
        if record_name is None or record_name not in names:
            facts.findings.append(Finding("record", Status.FAIL, "the wheel has no RECORD"))
        else:
            try:
                record_bytes = zf.read(record_name)
                facts.record_sha256 = hashlib.sha256(record_bytes).digest()
                record = _record_rows(record_bytes.decode("utf-8", "replace"))
            except csv.Error as exc:  # a stray newline in a field, a field too large
                facts.findings.append(Finding("record", Status.FAIL, f"RECORD is not valid CSV: {exc}"))
        for info in infos:
            name = info.filename
            if name == record_name:
                continue
            if ".." in name.split("/") or name.startswith("/") or "\\" in name:
                facts.findings.append(Finding("wheel", Status.FAIL,
                                              f"member {name!r} has an unsafe path"))
                continue
            digest = hashlib.sha256()
            size = 0
            keep_signed = is_signed_name(name) and info.file_size <= _MAX_TEXT
            keep_text = (_text_name(facts.dist_info, name) is not None and info.file_size <= _MAX_TEXT) \
                or keep_signed
            binary = is_binary_name(name)
            in_memory = binary and info.file_size <= _BINARY_IN_MEMORY
            text = bytearray()
            target = None
            if binary and not in_memory:
                target = scratch() / f"{len(facts.binaries):05d}_{name.rsplit('/', 1)[-1]}"
            try:
                with _open_member(zf, info) as member:
                    out = target.open("wb") if target else None
                    try:
                        while chunk := member.read(_CHUNK):
                            digest.update(chunk)
                            size += len(chunk)
                            if out is not None:
                                out.write(chunk)
                            if keep_text or in_memory:
                                text += chunk
                    finally:
                        if out is not None:
                            out.close()
            except UNREADABLE as exc:
                facts.findings.append(Finding("record", Status.FAIL, f"{name} cannot be read: {exc}"))
                continue
            facts.hashes[name] = digest.digest()
            facts.sizes[name] = size
            if target is not None:
                facts.binaries[name] = target
            elif in_memory:
                facts.binaries[name] = bytes(text)
            if keep_signed:
                facts.signed[name] = bytes(text)
            elif keep_text:
                facts.texts[name.split("/", 1)[1]] = text.decode("utf-8", "replace")
            if record is None:
                continue
            row = record.pop(name, None)
            if row is None:
                facts.findings.append(Finding("record", Status.FAIL, f"{name} is not listed in RECORD"))
                continue
            if _record_digest(row[0]) != facts.hashes[name]:
                facts.findings.append(Finding("record", Status.FAIL,
                                              f"{name}: its sha256 differs from RECORD's"))
            if row[1] != str(size):
                facts.findings.append(Finding("record", Status.FAIL,
                                              f"{name}: size {size} but RECORD says {row[1]}"))
        if record is not None:
            for missing in sorted(set(record) - {record_name}):
                facts.findings.append(Finding("record", Status.FAIL,
                                              f"RECORD lists {missing}, which is not in the wheel"))
            if not any(f.check == "record" for f in facts.findings):
                facts.findings.append(Finding("record", Status.PASS,
                                              "every member's sha256 and size match RECORD"))
    return facts


def written_wheel_contents(written: WrittenWheel, members: list[Member], filename: str) -> WheelContents:
    """The facts of a wheel this process just wrote: hashes from the writer, texts and
    binaries from the members it was written from."""
    names = [m.arcname for m in written.members]
    dist_info = _find_dist_info(names)
    facts = WheelContents(filename, [*names, f"{dist_info}/RECORD"], dist_info, path=written.path)
    facts.hashes = {m.arcname: m.sha256 for m in written.members}
    facts.sizes = {m.arcname: m.size for m in written.members}
    facts.record_sha256 = hashlib.sha256(written.record.encode()).digest()
    derived = dict(written.derived)
    for member in members:
        text_name = _text_name(dist_info, member.arcname)
        if text_name is not None:
            content = derived.get(member.arcname, member.content)
            facts.texts[text_name] = (content or b"").decode("utf-8")
        elif is_binary_name(member.arcname) and member.source is not None:
            facts.binaries[member.arcname] = member.source
        elif is_signed_name(member.arcname):
            facts.signed[member.arcname] = member.read_bytes()
    facts.findings.append(Finding("record", Status.PASS,
                                  "RECORD written from the hashes of the bytes packed"))
    return facts
