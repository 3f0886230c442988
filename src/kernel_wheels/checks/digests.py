"""metadata.json digests against the files actually packed (tampering after the build)."""

from __future__ import annotations

import json
import zipfile

from ..digest import NOT_DIGESTED, is_digested, sha256_b64
from ..layout import wheel_arcname
from .report import Finding, Status


def check_digests(zf: zipfile.ZipFile, provenance: dict[str, object] | None) -> list[Finding]:
    if not provenance or not provenance.get("metadata_json"):
        return []
    module = str(provenance.get("module"))
    kind = str(provenance.get("layout"))
    meta = provenance["metadata_json"]
    assert isinstance(meta, dict)
    digest = meta.get("digest")
    if not isinstance(digest, dict) or not digest.get("files"):
        return [Finding("digest", Status.NOT_VERIFIED, "metadata.json has no digest")]
    if digest.get("algorithm") != "sha256":
        return [Finding("digest", Status.NOT_VERIFIED,
                        f"digest algorithm {digest.get('algorithm')} is not checked")]
    names = set(zf.namelist())
    findings = []
    expected_arcnames = set()
    for relpath, expected in sorted(digest["files"].items()):
        arcname = wheel_arcname(relpath, kind, module)
        if arcname is None:
            continue  # not packed by design (the flat layout's compatibility sub-package)
        expected_arcnames.add(arcname)
        if arcname not in names:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{relpath} is in metadata.json's digest but not in the wheel"))
            continue
        with zf.open(arcname) as member:
            actual = sha256_b64(iter(lambda: member.read(1 << 20), b""))
        if actual != expected:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{arcname} differs from its metadata.json digest"))
    for arcname in sorted(names):
        if not arcname.startswith(module + "/"):
            continue
        relpath = arcname[len(module) + 1:] if kind == "flat" else arcname
        if arcname not in expected_arcnames and is_digested(relpath) \
                and relpath.rsplit("/", 1)[-1] not in NOT_DIGESTED:
            findings.append(Finding("digest", Status.FAIL,
                                    f"{arcname} is not covered by metadata.json's digest"))
    if not findings:
        findings.append(Finding("digest", Status.PASS,
                                f"{len(expected_arcnames)} files match metadata.json's digest"))
    return findings


def read_provenance(zf: zipfile.ZipFile, dist_info: str) -> dict[str, object] | None:
    from ..wheelmeta import PROVENANCE_FILE

    try:
        value = json.loads(zf.read(f"{dist_info}/{PROVENANCE_FILE}"))
    except (KeyError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
