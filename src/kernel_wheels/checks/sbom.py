"""The wheel's SBOM (PEP 770, ``<dist-info>/sboms/kernel-wheels.cdx.json``) against the
files actually in the wheel: every member but RECORD and the SBOM itself is listed, once,
with the sha256 it really has, and nothing else is listed.

The document comes from the wheel, so it is read as hostile: any shape that is not the
one kernel-wheels writes is a failure with a reason, never an exception.
"""

from __future__ import annotations

from typing import Any

from ..reading import parse_json
from ..wheel.sbom import SPEC_VERSION
from .facts import SBOM_TEXT, WheelContents
from .report import Finding, Status


def check_sbom(facts: WheelContents) -> list[Finding]:
    text = facts.texts.get(SBOM_TEXT)
    if text is None:
        if facts.provenance is not None:  # a kernel-wheels wheel from before SBOMs
            return [Finding("sbom", Status.NOT_VERIFIED, f"no {SBOM_TEXT} in the wheel")]
        return []
    listed, problem = _listed_files(text)
    if problem is not None:
        return [Finding("sbom", Status.FAIL, f"{SBOM_TEXT}: {problem}")]
    return _compare(facts, listed)


def _listed_files(text: str) -> tuple[dict[str, str], str | None]:
    """{member name: sha256 hex} from the kernel component's file list, or a problem."""
    try:
        document = parse_json(text)
    except (ValueError, RecursionError) as exc:
        return {}, f"not valid JSON ({exc.__class__.__name__})"
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX":
        return {}, "not a CycloneDX document"
    if document.get("specVersion") != SPEC_VERSION:
        return {}, f"CycloneDX {str(document.get('specVersion'))[:20]!r}, not {SPEC_VERSION}"
    components = document.get("components")
    kernel = next((c for c in components if isinstance(c, dict) and c.get("bom-ref") == "kernel"),
                  None) if isinstance(components, list) else None
    if kernel is None or not isinstance(kernel.get("components"), list):
        return {}, "no kernel component with a file list"
    listed: dict[str, str] = {}
    for entry in kernel["components"]:
        name, digest = _file_entry(entry)
        if name is None or digest is None:
            return {}, "a file entry without a name and one SHA-256 hash"
        if name in listed:
            return {}, f"{name[:200]} is listed twice"
        listed[name] = digest
    return listed, None


def _file_entry(entry: Any) -> tuple[str | None, str | None]:
    if not isinstance(entry, dict) or entry.get("type") != "file" \
            or not isinstance(entry.get("name"), str):
        return None, None
    hashes = entry.get("hashes")
    found = [h.get("content") for h in hashes if isinstance(h, dict) and h.get("alg") == "SHA-256"] \
        if isinstance(hashes, list) else []
    if len(found) != 1 or not isinstance(found[0], str):
        return entry["name"], None
    return entry["name"], found[0].lower()


def _compare(facts: WheelContents, listed: dict[str, str]) -> list[Finding]:
    own = {f"{facts.dist_info}/{SBOM_TEXT}", f"{facts.dist_info}/RECORD"}
    packed = {name: digest.hex() for name, digest in facts.hashes.items() if name not in own}
    findings = []
    for name in sorted(packed.keys() - listed.keys()):
        findings.append(Finding("sbom", Status.FAIL, f"{name} is in the wheel but not in its SBOM"))
    for name in sorted(listed.keys() - packed.keys()):
        findings.append(Finding("sbom", Status.FAIL,
                                f"the SBOM lists {name[:200]}, which is not in the wheel"))
    for name in sorted(listed.keys() & packed.keys()):
        if listed[name] != packed[name]:
            findings.append(Finding("sbom", Status.FAIL,
                                    f"{name}: its sha256 differs from the SBOM's"))
    if not findings:
        findings.append(Finding("sbom", Status.PASS,
                                f"the SBOM lists all {len(packed)} files with their sha256"))
    return findings
