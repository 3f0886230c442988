"""metadata.json digests against the files actually packed (tampering after the build)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from ..kernel.digest import NOT_DIGESTED, is_digested
from ..kernel.layout import wheel_arcname
from ..wheel.guard import remove_guard_line
from .facts import WheelFacts
from .report import Finding, Status


def check_digests(facts: WheelFacts) -> list[Finding]:
    provenance = facts.provenance
    if not provenance or not isinstance(provenance.get("metadata_json"), dict):
        return []
    module = str(provenance.get("module"))
    kind = str(provenance.get("layout"))
    digest = provenance["metadata_json"].get("digest")
    if not isinstance(digest, dict) or not isinstance(digest.get("files"), dict) \
            or not digest["files"]:
        return [Finding("digest", Status.NOT_VERIFIED, "metadata.json has no digest")]
    if digest.get("algorithm") != "sha256":
        return [Finding("digest", Status.NOT_VERIFIED,
                        f"digest algorithm {digest.get('algorithm')} is not checked")]
    raw_added = provenance.get("added_by_kernel_wheels")
    added: dict[str, Any] = raw_added if isinstance(raw_added, dict) else {}
    raw_modified = added.get("modified")
    modified: dict[str, Any] = raw_modified if isinstance(raw_modified, dict) else {}
    findings = []
    expected_arcnames = set()
    for relpath, expected in sorted(digest["files"].items()):
        arcname = wheel_arcname(relpath, kind, module)
        if arcname is None:
            continue  # not packed by design (the flat layout's compatibility sub-package)
        expected_arcnames.add(arcname)
        actual = facts.hashes.get(arcname)
        if arcname in modified and actual is not None:
            actual = _original_hash(facts, arcname, modified[arcname])
            if actual is None:
                findings.append(Finding("digest", Status.FAIL,
                                        f"{arcname} differs from its original by more than the "
                                        "line kernel-wheels records inserting"))
                continue
        if actual is None:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{relpath} is in metadata.json's digest but not in the wheel"))
        elif base64.b64encode(actual).decode("ascii") != expected:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{arcname} differs from its metadata.json digest"))
    for arcname in sorted(facts.hashes):
        if not arcname.startswith(module + "/"):
            continue
        relpath = arcname[len(module) + 1:] if kind == "flat" else arcname
        if arcname == added.get("import_guard"):
            continue  # added by kernel-wheels, and said so in the provenance record
        if arcname not in expected_arcnames and is_digested(relpath) \
                and relpath.rsplit("/", 1)[-1] not in NOT_DIGESTED:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{arcname} is not covered by metadata.json's digest"))
    if not findings:
        findings.append(Finding("digest", Status.PASS,
                                f"{len(expected_arcnames)} files match metadata.json's digest"))
    return findings


def _original_hash(facts: WheelFacts, arcname: str, record: object) -> bytes | None:
    """sha256 of a file as the kernel shipped it, before the import guard line went in."""
    content = facts.contents.get(arcname)
    if content is None or not isinstance(record, dict):
        return None
    original = remove_guard_line(content, record)
    return hashlib.sha256(original).digest() if original is not None else None
