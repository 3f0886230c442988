"""A wheel's provenance re-verified offline (the verdict's signature rule): each variant
folder's Sigstore bundle over its metadata.json, the signed digests against the files
packed, the record kernel-wheels wrote (``<dist-info>/kernel_wheels.verified.json``)
against what verifies now, and the policy's requirements (docs/provenance.md).

What the record says beyond the signature (the Hub's trusted-publisher flag) is not
signed: it is what the Hub answered when the wheel was made, taken as recorded."""

from __future__ import annotations

from dataclasses import replace

from ..errors import ProvenanceError
from ..kernel.digest import is_digested
from ..provenance import Policy, Verification, enforce, verify_files
from ..provenance.record import VERIFIED_FILE
from ..provenance.variant import BUNDLE
from .digests import member_digests
from .facts import UNREADABLE, WheelContents
from .report import Finding, Status


def check_signature(facts: WheelContents, policy: Policy) -> tuple[list[Finding], Verification | None]:
    """Findings, and the verification as it stands now (None if the wheel carries no
    variant folder kernel-wheels knows)."""
    provenance = facts.provenance or {}
    folder = provenance.get("variant_folder")
    if not isinstance(folder, str) or folder.count("/") != 1:
        return [Finding("provenance", Status.NOT_VERIFIED,
                        "no variant folder recorded (not a kernel-wheels wheel)")], None
    text = facts.texts.get(VERIFIED_FILE)
    recorded = Verification.from_text(text) if text is not None else None
    if text is not None and recorded is None:
        return [Finding("provenance", Status.FAIL, f"{VERIFIED_FILE} is not a record this "
                                                   "version reads")], None
    kernel = recorded.kernel if recorded else str(provenance.get("source") or folder.split("/")[0])
    variant = recorded.variant if recorded else f"build/{folder.split('/')[1]}"
    metadata = facts.signed.get(f"{folder}/metadata.json")
    bundle = facts.signed.get(f"{folder}/{BUNDLE}")
    for name in ("metadata.json", BUNDLE):
        if f"{folder}/{name}" in facts.hashes and f"{folder}/{name}" not in facts.signed:
            return [Finding("provenance", Status.FAIL, f"{kernel} {variant}: {name} is too large "
                                                       "to be what it claims")], None
    def files(algorithm: str) -> dict[str, str]:
        """The packed files by the signed digest's algorithm (sha512: read once more)."""
        return {relpath: digest for relpath, digest in member_digests(facts, folder, algorithm).items()
                if is_digested(relpath)}

    try:
        # The publisher's trust is the recorded one: offline, nobody else can say.
        now = verify_files(kernel, variant, metadata, bundle, replace(
            policy, require_trusted_publisher=False), files,
            recorded.publisher if recorded else None,
            recorded.trusted_publisher if recorded else None)
    except ProvenanceError as exc:
        return [Finding("provenance", Status.FAIL, exc.message)], None
    except UNREADABLE as exc:
        return [Finding("provenance", Status.FAIL, f"{kernel} {variant}: the packed files cannot "
                                                   f"be read again: {exc}")], None
    findings = [Finding("provenance", Status.FAIL, difference)
                for difference in (recorded.differences(now) if recorded else [])]
    try:
        enforce(now, policy)
    except ProvenanceError as exc:
        findings.append(Finding("provenance", Status.FAIL, exc.message))
    if not findings:
        if now.signed:
            findings.append(Finding("provenance", Status.PASS, now.one_line() +
                                    f"; {now.files_verified} files match the signed digest"))
        else:
            findings.append(Finding("provenance", Status.NOT_VERIFIED, now.one_line()))
    return findings, now
