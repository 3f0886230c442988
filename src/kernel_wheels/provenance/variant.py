"""A variant against a policy: its bundle over metadata.json, the signed digests
against every file of the variant, the publisher and the build's dirty flag.

Always refused, whatever the policy: a bundle that does not verify (a bad signature, a
signer the policy does not accept, an expired certificate, a bundle of another
artifact, garbage), a signed metadata.json without digests, a file that differs from
its signed digest, a file the digest does not cover, a covered file that is missing.
Refused by policy: no bundle (``require_signature``), an untrusted publisher
(``require_trusted_publisher`` unless ``trust_remote_code``), a dirty build
(``require_clean``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ..confine import Refusal, shown
from ..errors import MetadataError, ProvenanceError, UntrustedPublisherError
from ..kernel.digest import algorithms, digest_folder
from ..reading import parse_json, read_regular
from .policy import Policy
from .record import BuildFacts, Verification

BUNDLE = "metadata.json.sigstore"
#: A Sigstore bundle is a few kB; a larger one is refused before it is read (a hostile
#: source must not make the tool hold gigabytes).
MAX_BUNDLE = 1 << 20


#: The variant's digested files hashed with an algorithm: ``{relpath: base64 hash}``.
FileDigests = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True)
class SignedDigest:
    """A verified metadata.json's ``digest``: what every file of the variant must be."""

    algorithm: str
    files: tuple[tuple[str, str], ...]


def _refuse(kernel: str, variant: str, reason: str) -> ProvenanceError:
    return ProvenanceError(f"{kernel} {variant}: {reason}")


def verify_files(kernel: str, variant: str, metadata: bytes | None, bundle: bytes | None,
                 policy: Policy, files: FileDigests | None = None,
                 publisher: str | None = None, trusted: bool | None = None) -> Verification:
    """Verify one variant from its metadata.json and bundle bytes (``None``: absent).
    ``files``: the variant's digested files hashed with the algorithm the signed digest
    names (as kernel.digest computes them); ``None`` when the caller compares them itself
    later (to-wheel, from the bytes it packs: :func:`digest_mismatch`)."""
    if bundle is None:
        if policy.require_signature:
            raise _refuse(kernel, variant, "unsigned (no metadata.json.sigstore) and the policy "
                                           "requires a signature")
        verification = Verification(kernel, variant, signed=False, metadata_sha256=_sha(metadata),
                                    build=_build(kernel, variant, metadata))
        return enforce(replace(verification, publisher=publisher, trusted_publisher=trusted), policy)
    if metadata is None:
        raise _refuse(kernel, variant, "metadata.json.sigstore without the metadata.json it signs")
    if len(bundle) > MAX_BUNDLE:
        raise _refuse(kernel, variant, f"metadata.json.sigstore is {len(bundle)} bytes, not a "
                                       f"Sigstore bundle (at most {MAX_BUNDLE})")
    # Here: an unsigned variant never loads the signature machinery (issue #42).
    from .signature import SignatureRefused, verify_bundle

    try:
        signed = verify_bundle(metadata, bundle, policy)
    except SignatureRefused as exc:
        raise _refuse(kernel, variant, str(exc)) from None
    expected = signed_digest(kernel, variant, metadata)
    if files is not None and (reason := digest_mismatch(dict(expected.files),
                                                        files(expected.algorithm))) is not None:
        raise _refuse(kernel, variant, reason)
    verification = Verification(
        kernel, variant, signed=True, identity=signed.identity, issuer=signed.issuer,
        log_index=signed.log_index, log_time=signed.integrated_time, trust_root=signed.trust_root,
        metadata_sha256=_sha(metadata), bundle_sha256=_sha(bundle), files_verified=len(expected.files),
        publisher=publisher, trusted_publisher=trusted, build=_build(kernel, variant, metadata))
    return enforce(verification, policy)


def signed_digest(kernel: str, variant: str, metadata: bytes) -> SignedDigest:
    """The digest of a metadata.json whose signature verified: its algorithm (one of
    kernels-data's, sha256 or sha512) and ``(relpath, base64 hash)`` of every file."""
    try:
        raw = parse_json(metadata)
    except (ValueError, RecursionError):
        raise _refuse(kernel, variant, "the signed metadata.json is not valid JSON") from None
    digest = raw.get("digest") if isinstance(raw, dict) else None
    if not isinstance(digest, dict):
        digest = {}
    files = digest.get("files")
    if not isinstance(files, dict) or not files or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise _refuse(kernel, variant, "the signed metadata.json has no file digests: the "
                                       "signature covers none of the variant's files")
    algorithm = digest.get("algorithm")
    if algorithm not in algorithms():
        raise _refuse(kernel, variant, f"the signed metadata.json's digest algorithm "
                                       f"'{shown(str(algorithm))}' is not one kernels reads "
                                       f"({', '.join(algorithms())})")
    return SignedDigest(str(algorithm), tuple(sorted(files.items())))


def digest_mismatch(expected: Mapping[str, str], actual: Mapping[str, str]) -> str | None:
    """The first difference between the signed digests and the variant's files, as a
    reason; None when every file is covered and equal."""
    for relpath, want in sorted(expected.items()):
        have = actual.get(relpath)
        if have is None:
            return f"{shown(relpath)} is in the signed digest but not in the variant"
        if have != want:
            return f"{shown(relpath)} differs from its signed digest"
    for relpath in sorted(set(actual) - set(expected)):
        return f"{shown(relpath)} is not covered by the signed digest"
    return None


def enforce(verification: Verification, policy: Policy) -> Verification:
    """The policy's requirements beyond the signature: publisher and clean build."""
    kernel, variant = verification.kernel, verification.variant
    if policy.require_signature and not verification.signed:
        raise _refuse(kernel, variant, "unsigned (no metadata.json.sigstore) and the policy "
                                       "requires a signature")
    if verification.trusted_publisher is not True and not policy.accepts_untrusted(kernel):
        why = ("is not a trusted publisher on the Hub" if verification.trusted_publisher is False
               else "could not be confirmed as a trusted publisher")
        raise UntrustedPublisherError(f"{kernel} {variant}: publisher "
                                      f"'{shown(verification.publisher or '?')}' {why} "
                                      "(--trust-remote-code accepts it)")
    if policy.require_clean and verification.build.dirty:
        raise _refuse(kernel, variant, "built from a dirty git tree (uncommitted changes) and the "
                                       "policy requires clean builds")
    return verification


def verify_variant_folder(folder: Path, kernel: str, policy: Policy, *, variant: str | None = None,
                          publisher: str | None = None, trusted: bool | None = None) -> Verification:
    """A variant folder (``build/<variant>/``, an installed kernel's variant folder)."""
    variant = variant or folder.name
    metadata = _read(folder / "metadata.json", kernel, variant)
    bundle = _read(folder / BUNDLE, kernel, variant)
    def refused(refusal: Refusal) -> ProvenanceError:
        return _refuse(kernel, variant, refusal.message(refusal.relpath or folder.name, "the variant folder",
                                                        "verify it"))

    files = partial(digest_folder, folder, refuse=refused) if bundle is not None else None
    return verify_files(kernel, variant, metadata, bundle, policy, files, publisher, trusted)


def _read(path: Path, kernel: str, variant: str) -> bytes | None:
    try:
        if not path.is_file():
            return None
        if path.name == BUNDLE and path.stat().st_size > MAX_BUNDLE:
            raise _refuse(kernel, variant, f"{BUNDLE} is {path.stat().st_size} bytes, not a "
                                           f"Sigstore bundle (at most {MAX_BUNDLE})")
        return read_regular(path, path.name, lambda why: _refuse(kernel, variant, why))
    except OSError as exc:
        raise _refuse(kernel, variant, f"cannot read {path.name}: {exc.strerror or exc}") from None


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _build(kernel: str, variant: str, metadata: bytes | None) -> BuildFacts:
    """metadata.json's build provenance; a provenance kernels cannot read is refused
    (kernels refuses to load such a build, and its dirty flag would go unseen)."""
    if metadata is None:
        return BuildFacts()
    try:
        raw = parse_json(metadata)
    except (ValueError, RecursionError):
        return BuildFacts()  # the metadata reader says why, in its own words
    try:
        return BuildFacts.from_metadata(raw) if isinstance(raw, dict) else BuildFacts()
    except MetadataError as exc:
        raise _refuse(kernel, variant, exc.message) from None
