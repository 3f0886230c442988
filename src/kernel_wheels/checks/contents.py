"""RECORD, METADATA and WHEEL: is the archive what its file name says?"""

from __future__ import annotations

import csv
import io
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from wheel.wheelfile import WheelError, WheelFile

from ..errors import MetadataError
from ..wheelmeta import validate_metadata
from .report import Finding, Status

BINARY_SUFFIXES = (".so", ".dylib", ".dll", ".pyd")


def is_binary_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(BINARY_SUFFIXES) or ".so." in base


def parse_filename(filename: str) -> tuple[str, str, frozenset[Tag]]:
    name, version, _build, tags = parse_wheel_filename(filename)
    return str(name), str(version), tags


def check_record(path: Path) -> list[Finding]:
    """Every member listed in RECORD with the right sha256 and size, and nothing else."""
    findings = []
    try:
        with WheelFile(path) as wf:
            record_name = wf.record_path
            record = wf.read(record_name).decode("utf-8")
            listed = {row[0]: row for row in csv.reader(io.StringIO(record)) if row}
            for info in wf.infolist():
                if info.is_dir() or info.filename == record_name:
                    continue
                row = listed.pop(info.filename, None)
                if row is None:
                    findings.append(Finding("record", Status.FAIL,
                                            f"{info.filename} is not listed in RECORD"))
                    continue
                with wf.open(info) as member:  # WheelFile verifies the hash on read
                    size = sum(len(chunk) for chunk in iter(lambda: member.read(1 << 20), b""))
                if row[2] != str(size):
                    findings.append(Finding("record", Status.FAIL,
                                            f"{info.filename}: size {size} but RECORD says {row[2]}"))
            for missing in sorted(set(listed) - {record_name}):
                findings.append(Finding("record", Status.FAIL,
                                        f"RECORD lists {missing}, which is not in the wheel"))
    except WheelError as exc:
        return [Finding("record", Status.FAIL, str(exc))]
    except zipfile.BadZipFile as exc:
        return [Finding("record", Status.FAIL, f"not a zip archive: {exc}")]
    if not findings:
        findings.append(Finding("record", Status.PASS, "every member's sha256 and size match RECORD"))
    return findings


def check_metadata_and_wheel(path: Path, filename: str, members: list[str]) -> list[Finding]:
    try:
        name, version, tags = parse_filename(filename)
    except InvalidWheelFilename as exc:
        return [Finding("wheel", Status.FAIL, f"invalid wheel file name: {exc}")]
    findings = []
    dist_info = next((m.split("/")[0] for m in members
                      if m.count("/") == 1 and m.endswith(".dist-info/METADATA")), None)
    if dist_info is None:
        return [Finding("metadata", Status.FAIL, "no .dist-info/METADATA in the wheel")]
    with zipfile.ZipFile(path) as zf:
        metadata = zf.read(f"{dist_info}/METADATA").decode("utf-8")
        wheel = zf.read(f"{dist_info}/WHEEL").decode("utf-8") \
            if f"{dist_info}/WHEEL" in members else None
    try:
        parsed = validate_metadata(metadata)
    except MetadataError as exc:
        findings.append(Finding("metadata", Status.FAIL, exc.message))
    else:
        if canonicalize_name(parsed.name) != canonicalize_name(name):
            findings.append(Finding("metadata", Status.FAIL,
                                    f"METADATA name {parsed.name} differs from the file name's {name}"))
        if str(parsed.version) != version:
            findings.append(Finding("metadata", Status.FAIL,
                                    f"METADATA version {parsed.version} differs from the file "
                                    f"name's {version}"))
        if not any(f.check == "metadata" for f in findings):
            findings.append(Finding("metadata", Status.PASS,
                                    f"valid core metadata {parsed.metadata_version}, "
                                    f"{parsed.name} {parsed.version}"))
    if wheel is None:
        findings.append(Finding("wheel", Status.FAIL, f"{dist_info}/WHEEL is missing"))
        return findings
    headers = HeaderParser().parsestr(wheel)
    wheel_tags = frozenset(t for line in headers.get_all("Tag", []) for t in parse_tag(line))
    if wheel_tags != tags:
        findings.append(Finding("wheel", Status.FAIL,
                                f"WHEEL tags {sorted(map(str, wheel_tags))} differ from the file "
                                f"name's {sorted(map(str, tags))}"))
    purelib = (headers.get("Root-Is-Purelib") or "").strip().lower()
    pure_tags = all(t.platform == "any" for t in tags)
    has_binaries = any(is_binary_name(m) for m in members)
    if purelib not in ("true", "false"):
        findings.append(Finding("wheel", Status.FAIL, "WHEEL has no valid Root-Is-Purelib"))
    elif (purelib == "true") != pure_tags:
        findings.append(Finding("wheel", Status.FAIL,
                                f"Root-Is-Purelib: {purelib} contradicts the platform tags"))
    if pure_tags and has_binaries:
        findings.append(Finding("wheel", Status.FAIL,
                                "a platform-independent (any) wheel holds compiled binaries"))
    if not any(f.check == "wheel" for f in findings):
        findings.append(Finding("wheel", Status.PASS, "WHEEL tags and Root-Is-Purelib agree"))
    return findings
