"""metadata.json digests against the files actually packed (tampering after the build).

The variant folder is carried unchanged (wheel layout 2, :mod:`kernel_wheels.wheel.loader`),
so it is checked against its digest both ways: every digested file is there and equal,
and nothing else is in the folder."""

from __future__ import annotations

import base64
from typing import Any

from ..kernel.digest import NOT_DIGESTED, is_digested
from .facts import WheelContents
from .report import Finding, Status


def check_digests(facts: WheelContents) -> list[Finding]:
    provenance = facts.provenance
    if not provenance or not isinstance(provenance.get("metadata_json"), dict):
        return []
    digest = provenance["metadata_json"].get("digest")
    if not isinstance(digest, dict) or not isinstance(digest.get("files"), dict) \
            or not digest["files"]:
        return [Finding("digest", Status.NOT_VERIFIED, "metadata.json has no digest")]
    if digest.get("algorithm") != "sha256":
        return [Finding("digest", Status.NOT_VERIFIED,
                        f"digest algorithm {digest.get('algorithm')} is not checked")]
    raw_added = provenance.get("added_by_kernel_wheels")
    added: dict[str, Any] = raw_added if isinstance(raw_added, dict) else {}
    if provenance.get("wheel_layout") != 2:
        return [Finding("digest", Status.NOT_VERIFIED,
                        "made by kernel-wheels 0.1, whose layout this version does not verify")]
    return _check_variant_folder(facts, str(provenance.get("variant_folder")), digest["files"],
                                 {str(v) for v in added.values()})


def _check_variant_folder(facts: WheelContents, folder: str, expected: dict[str, str],
                          added: set[str]) -> list[Finding]:
    """The variant folder is carried unchanged (wheel layout 2): every digested file is
    there with its digest, nothing else is in the folder but metadata.json and its
    signature, and beside it only what kernel-wheels says it added."""
    findings = []
    for relpath, want in sorted(expected.items()):
        actual = facts.hashes.get(f"{folder}/{relpath}")
        if actual is None:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{relpath} is in metadata.json's digest but not in the wheel"))
        elif base64.b64encode(actual).decode("ascii") != want:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{folder}/{relpath} differs from its metadata.json digest"))
    module = folder.split("/", 1)[0]
    for arcname in sorted(facts.hashes):
        if arcname.startswith(folder + "/"):
            relpath = arcname[len(folder) + 1:]
            if relpath not in expected and is_digested(relpath) and relpath not in NOT_DIGESTED:
                findings.append(Finding("digest", Status.FAIL,
                                        f"{arcname} is not covered by metadata.json's digest"))
        elif arcname.startswith(module + "/") and arcname not in added:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{arcname} is neither the kernel's nor added by kernel-wheels"))
    if not findings:
        findings.append(Finding("digest", Status.PASS,
                                f"{len(expected)} files match metadata.json's digest"))
    return findings
