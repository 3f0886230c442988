"""METADATA and WHEEL: is the archive what its file name says?"""

from __future__ import annotations

from email.parser import HeaderParser
from functools import lru_cache

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..errors import MetadataError
from ..kernel.layout import is_binary_name
from ..wheel.metadata import validate_metadata
from ..wheel.variant_label import split_variant_label
from .facts import WheelContents
from .report import Finding, Status


@lru_cache(maxsize=64)  # each check asks again; an index checks thousands of wheels
def parse_filename(filename: str) -> tuple[str, str, frozenset[Tag]]:
    """Name, version and tags; a variant wheel's label (PEP 825 draft) is set aside
    (``check_variant_json`` judges it)."""
    name, version, _build, tags = parse_wheel_filename(split_variant_label(filename)[0])
    return str(name), str(version), tags


def check_metadata_and_wheel(facts: WheelContents) -> list[Finding]:
    try:
        name, version, tags = parse_filename(facts.filename)
    except InvalidWheelFilename as exc:
        return [Finding("wheel", Status.FAIL, f"invalid wheel file name: {exc}")]
    metadata = facts.texts.get("METADATA")
    if facts.dist_info is None or metadata is None:
        return [Finding("metadata", Status.FAIL, "no .dist-info/METADATA in the wheel")]
    findings = []
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
    wheel = facts.texts.get("WHEEL")
    if wheel is None:
        findings.append(Finding("wheel", Status.FAIL, f"{facts.dist_info}/WHEEL is missing"))
        return findings
    headers = HeaderParser().parsestr(wheel)
    try:
        wheel_tags = frozenset(t for line in headers.get_all("Tag", []) for t in parse_tag(line))
    except ValueError:
        wheel_tags = frozenset()
    if wheel_tags != tags:
        findings.append(Finding("wheel", Status.FAIL,
                                f"WHEEL tags {sorted(map(str, wheel_tags))} differ from the file "
                                f"name's {sorted(map(str, tags))}"))
    purelib = (headers.get("Root-Is-Purelib") or "").strip().lower()
    pure_tags = all(t.platform == "any" for t in tags)
    has_binaries = any(is_binary_name(m) for m in facts.members)
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
