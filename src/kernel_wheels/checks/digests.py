"""metadata.json digests against the files actually packed (tampering after the build).

The variant folder is carried unchanged (wheel layout 2, :mod:`kernel_wheels.wheel.loader`),
so it is checked against its digest both ways: every digested file is there and equal,
and nothing else is in the folder. Both of kernels-data's algorithms are verified: sha256
from the hashes the wheel was read with, sha512 by reading the folder's members again."""

from __future__ import annotations

import base64
import zipfile
from pathlib import Path
from typing import Any

from ..confine import shown
from ..kernel.digest import NOT_DIGESTED, algorithms, b64_digest, is_digested
from .facts import UNREADABLE, WheelContents
from .report import Finding, Status

_CHUNK = 1 << 20


def check_digests(facts: WheelContents) -> list[Finding]:
    provenance = facts.provenance
    if not provenance or not isinstance(provenance.get("metadata_json"), dict):
        return []
    digest = provenance["metadata_json"].get("digest")
    if not isinstance(digest, dict) or not isinstance(digest.get("files"), dict) \
            or not digest["files"]:
        return [Finding("digest", Status.NOT_VERIFIED, "metadata.json has no digest")]
    algorithm = digest.get("algorithm")
    if algorithm not in algorithms():
        return [Finding("digest", Status.FAIL,
                        f"digest algorithm {shown(str(algorithm), 40)} is not one kernels reads "
                        f"({', '.join(algorithms())}): kernels refuses this metadata.json")]
    raw_added = provenance.get("added_by_kernel_wheels")
    added: dict[str, Any] = raw_added if isinstance(raw_added, dict) else {}
    if provenance.get("wheel_layout") != 2:
        return [Finding("digest", Status.NOT_VERIFIED,
                        "made by kernel-wheels 0.1, whose layout this version does not verify")]
    folder = str(provenance.get("variant_folder"))
    try:
        actual = member_digests(facts, folder, str(algorithm))
    except UNREADABLE as exc:
        return [Finding("digest", Status.FAIL, f"{folder} cannot be read again for its "
                                               f"{algorithm} digest: {exc}")]
    return _check_variant_folder(facts, folder, digest["files"], actual,
                                 {str(v) for v in added.values()})


def member_digests(facts: WheelContents, folder: str, algorithm: str) -> dict[str, str]:
    """``{relpath: base64 hash}`` of the members under ``folder/`` with ``algorithm``."""
    prefix = folder + "/"
    if algorithm == "sha256":
        return {name[len(prefix):]: base64.b64encode(digest).decode("ascii")
                for name, digest in facts.hashes.items() if name.startswith(prefix)}
    if facts.path is None:
        raise OSError(f"the wheel's file is not at hand to hash with {algorithm}")
    return zip_member_digests(facts.path, prefix, algorithm)


def zip_member_digests(wheel: Path, prefix: str, algorithm: str) -> dict[str, str]:
    """``{relpath: base64 hash}`` of a wheel's members under ``prefix`` (``module/variant/``),
    each inflated once more and hashed with ``algorithm``."""
    found = {}
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            with archive.open(info) as member:
                found[info.filename[len(prefix):]] = b64_digest(iter(lambda: member.read(_CHUNK), b""),
                                                                algorithm)
    return found


def _check_variant_folder(facts: WheelContents, folder: str, expected: dict[str, str],
                          hashes: dict[str, str], added: set[str]) -> list[Finding]:
    """The variant folder is carried unchanged (wheel layout 2): every digested file is
    there with its digest (``hashes``: the members' own, by the digest's algorithm),
    nothing else is in the folder but metadata.json and its signature, and beside it
    only what kernel-wheels says it added."""
    findings = []
    for relpath, want in sorted(expected.items()):
        actual = hashes.get(relpath)
        if actual is None:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{relpath} is in metadata.json's digest but not in the wheel"))
        elif actual != want:
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
