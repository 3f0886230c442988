#!/usr/bin/env python3
"""Sign a file the way kernels-community's build workflows do, under a test Sigstore
deployment made here: the fixture generator of the provenance tests (docs/provenance.md).

    python scripts/make_test_signature.py build/<variant>/metadata.json \\
        --identity https://github.com/ORG/REPO/.github/workflows/build.yaml@refs/heads/main \\
        --issuer https://token.actions.githubusercontent.com \\
        --bundle build/<variant>/metadata.json.sigstore --trusted-root root.json

What it makes, so that the real ``sigstore`` library's ``Verifier`` accepts the bundle
under ``root.json`` (and under no other root):

- a certificate authority (Fulcio's role): a root CA issuing a short-lived leaf
  certificate with Fulcio's layout: empty subject, critical SAN holding the identity
  (a URI, or an e-mail address), code-signing EKU, the OIDC issuer (1.3.6.1.4.1.57264.1.1
  and .1.8), the build signer URI (.1.9) and the source repository (.1.12, derived from a
  GitHub workflow identity or ``--source-repository``);
- a certificate transparency log (CT): its key, and the SCT embedded in the leaf
  (a precertificate SCT, as Fulcio's are);
- a transparency log (Rekor v1): its key, a ``hashedrekord`` 0.0.1 entry for the
  signature, the entry's Merkle inclusion proof in a log of ``--tree-size`` entries, a
  signed checkpoint, and the signed entry timestamp (SET) giving the integrated time;
- the trusted root (``application/vnd.dev.sigstore.trustedroot+json;version=0.1``)
  naming the three, and the bundle (``application/vnd.dev.sigstore.bundle.v0.3+json``).

Each run makes a new deployment unless ``--deployment DIR`` is given: then the keys are
kept there (made on first use) and later runs sign under the same trusted root (a
bundle of another artifact, several variants of one release).

Bad cases for tests: ``--expired`` (the certificate ended before the log's integrated
time), ``--signing-time`` (any time; the certificate is valid for 10 minutes from it),
a wrong ``--identity`` or ``--issuer``. Test material only: the private keys are in
the clear.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import struct
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

GITHUB_WORKFLOW = re.compile(r"(https://github\.com/[^/]+/[^/]+)/\.github/workflows/[^@]+@.+")
_OID = "1.3.6.1.4.1.57264.1."
_SCT_LIST_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
_KEYS = ("ca", "ctlog", "tlog")
#: How long a leaf certificate lives (Fulcio's are valid for 10 minutes).
CERT_LIFETIME = timedelta(minutes=10)


def _key_id(public_key: ec.EllipticCurvePublicKey) -> bytes:
    """RFC 6962's key ID: sha256 of the DER SubjectPublicKeyInfo."""
    spki = public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _utf8_der(text: str) -> bytes:
    """A DER UTF8String (the value of Fulcio's "V2" extensions)."""
    raw = text.encode("utf-8")
    if len(raw) < 0x80:
        length = bytes([len(raw)])
    else:
        size = len(raw).to_bytes((len(raw).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return b"\x0c" + length + raw


def _octet_string_der(raw: bytes) -> bytes:
    size = len(raw)
    if size < 0x80:
        length = bytes([size])
    else:
        encoded = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(encoded)]) + encoded
    return b"\x04" + length + raw


class Deployment:
    """The three keys of a test Sigstore deployment and the root CA's certificate."""

    def __init__(self, folder: Path | None) -> None:
        self.keys: dict[str, ec.EllipticCurvePrivateKey] = {}
        for name in _KEYS:
            path = folder / f"{name}.pem" if folder else None
            if path is not None and path.is_file():
                loaded = serialization.load_pem_private_key(path.read_bytes(), None)
                assert isinstance(loaded, ec.EllipticCurvePrivateKey)
                self.keys[name] = loaded
                continue
            self.keys[name] = ec.generate_private_key(ec.SECP256R1())
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.keys[name].private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption()))
        self.start = datetime(2020, 1, 1, tzinfo=UTC)
        ca_key = self.keys["ca"]
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kernel-wheels test"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "kernel-wheels test CA")])
        # Deterministic for a kept deployment: the same keys give the same root.
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(ca_key.public_key())
            .serial_number(int.from_bytes(_key_id(ca_key.public_key())[:16], "big") >> 1)
            .not_valid_before(self.start)
            .not_valid_after(datetime(2099, 1, 1, tzinfo=UTC))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )

    def trusted_root(self) -> dict[str, object]:
        def log(name: str, url: str) -> dict[str, object]:
            public = self.keys[name].public_key()
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": _b64(public.public_bytes(
                        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"},
                },
                "logId": {"keyId": _b64(_key_id(public))},
            }

        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log("tlog", "https://rekor.kernel-wheels.invalid")],
            "certificateAuthorities": [{
                "subject": {"organization": "kernel-wheels test", "commonName": "kernel-wheels test CA"},
                "uri": "https://fulcio.kernel-wheels.invalid",
                "certChain": {"certificates": [
                    {"rawBytes": _b64(self.ca_cert.public_bytes(serialization.Encoding.DER))}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"},
            }],
            "ctlogs": [log("ctlog", "https://ctfe.kernel-wheels.invalid")],
            "timestampAuthorities": [],
        }

    # -- the certificate authority and the CT log ---------------------------------------

    def leaf(self, key: ec.EllipticCurvePrivateKey, identity: str, issuer: str,
             source_repository: str | None, not_before: datetime) -> x509.Certificate:
        """A Fulcio-style leaf certificate with its SCT embedded (a precertificate SCT:
        signed over the certificate without the SCT extension)."""
        san: x509.GeneralName = (x509.RFC822Name(identity) if "@" in identity and "://" not in identity
                                 else x509.UniformResourceIdentifier(identity))
        ca_public = self.keys["ca"].public_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_before + CERT_LIFETIME)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_public), critical=False)
            .add_extension(x509.SubjectAlternativeName([san]), critical=True)
            .add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(_OID + "1"),
                                                      issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(_OID + "8"),
                                                      _utf8_der(issuer)), critical=False)
            .add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(_OID + "9"),
                                                      _utf8_der(identity)), critical=False)
        )
        if source_repository:
            builder = builder.add_extension(x509.UnrecognizedExtension(
                x509.ObjectIdentifier(_OID + "12"), _utf8_der(source_repository)), critical=False)
        # The precertificate: the same TBSCertificate, without the SCT list.
        precert = builder.sign(self.keys["ca"], hashes.SHA256())
        sct = self._sct(precert.tbs_certificate_bytes, not_before)
        sct_list = struct.pack("!H", len(sct)) + sct
        final = builder.add_extension(
            x509.UnrecognizedExtension(_SCT_LIST_OID,
                                       _octet_string_der(struct.pack("!H", len(sct_list)) + sct_list)),
            critical=False).sign(self.keys["ca"], hashes.SHA256())
        assert final.tbs_precertificate_bytes == precert.tbs_certificate_bytes
        return final

    def _sct(self, tbs: bytes, when: datetime) -> bytes:
        """One RFC 6962 SCT (v1, precert_entry) by the CT log, TLS-encoded."""
        log_key = self.keys["ctlog"]
        timestamp = int(when.timestamp() * 1000)
        issuer_key_hash = _key_id(self.keys["ca"].public_key())
        entry = issuer_key_hash + len(tbs).to_bytes(3, "big") + tbs
        signed = struct.pack("!BBQH", 0, 0, timestamp, 1) + entry + struct.pack("!H", 0)
        signature = log_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return (bytes([0]) + _key_id(log_key.public_key()) + struct.pack("!QH", timestamp, 0)
                + bytes([4, 3]) + struct.pack("!H", len(signature)) + signature)

    # -- the transparency log -------------------------------------------------------------

    def log_entry(self, body: bytes, integrated_time: int, log_index: int,
                  tree_size: int) -> dict[str, object]:
        """A Rekor v1 entry for ``body`` at ``log_index`` in a log of ``tree_size``
        entries (the others are filler), with its inclusion proof, signed checkpoint and
        signed entry timestamp."""
        tlog_key = self.keys["tlog"]
        log_id = _key_id(tlog_key.public_key())
        leaves = [_leaf_hash(body if i == log_index else f"filler {i}".encode())
                  for i in range(tree_size)]
        root = _subtree_hash(leaves)
        proof = _inclusion_path(log_index, leaves)
        origin = f"rekor.kernel-wheels.invalid - {int.from_bytes(log_id[:8], 'big')}"
        note = f"{origin}\n{tree_size}\n{_b64(root)}\n"
        note_signature = tlog_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = f"{note}\n\u2014 {origin.split(' ')[0]} {_b64(log_id[:4] + note_signature)}\n"
        promise = rfc8785.dumps({"body": _b64(body), "integratedTime": integrated_time,
                                 "logID": log_id.hex(), "logIndex": log_index})
        return {
            "logIndex": str(log_index),
            "logId": {"keyId": _b64(log_id)},
            "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": _b64(tlog_key.sign(
                promise, ec.ECDSA(hashes.SHA256())))},
            "inclusionProof": {
                "logIndex": str(log_index),
                "rootHash": _b64(root),
                "treeSize": str(tree_size),
                "hashes": [_b64(h) for h in proof],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (RFC 6962's k)."""
    k = 1
    while k << 1 < n:
        k <<= 1
    return k


def _subtree_hash(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node_hash(_subtree_hash(leaves[:k]), _subtree_hash(leaves[k:]))


def _inclusion_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 PATH(m, D[n]), lowest level first."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return _inclusion_path(index, leaves[:k]) + [_subtree_hash(leaves[k:])]
    return _inclusion_path(index - k, leaves[k:]) + [_subtree_hash(leaves[:k])]


def sign(artifact: bytes, deployment: Deployment, identity: str, issuer: str,
         source_repository: str | None, signing_time: datetime, expired: bool = False,
         log_index: int = 7, tree_size: int = 10) -> dict[str, object]:
    """The Sigstore bundle (v0.3, message signature) of ``artifact``."""
    key = ec.generate_private_key(ec.SECP256R1())
    # An expired certificate: it ended before the log integrated the entry.
    not_before = signing_time - CERT_LIFETIME - timedelta(minutes=5) if expired else \
        signing_time - timedelta(seconds=30)
    cert = deployment.leaf(key, identity, issuer, source_repository, not_before)
    signature = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    digest = hashlib.sha256(artifact).digest()
    pem = cert.public_bytes(serialization.Encoding.PEM)
    body = json.dumps({
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
            "signature": {"content": _b64(signature), "publicKey": {"content": _b64(pem)}},
        },
    }, sort_keys=True, separators=(",", ":")).encode()
    entry = deployment.log_entry(body, int(signing_time.timestamp()), log_index, tree_size)
    return {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [entry],
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
            "signature": _b64(signature),
        },
    }


def _time(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact", metavar="METADATA_JSON", type=Path, help="the file to sign")
    parser.add_argument("--identity", required=True,
                        help="the signer identity (certificate SAN and build signer URI): a "
                             "GitHub workflow URI ...@refs/heads/main, or an e-mail address")
    parser.add_argument("--issuer", required=True, help="the OIDC issuer URL")
    parser.add_argument("--bundle", required=True, type=Path, help="where to write the bundle")
    parser.add_argument("--trusted-root", required=True, type=Path,
                        help="where to write the deployment's trusted root")
    parser.add_argument("--source-repository", default=None,
                        help="the source repository URI extension (default: the GitHub "
                             "repository of a workflow identity, else none)")
    parser.add_argument("--deployment", type=Path, default=None,
                        help="keep the deployment's keys in DIR (made on first use) and reuse them")
    parser.add_argument("--signing-time", type=_time, default=None,
                        help="the log's integrated time (default: now)")
    parser.add_argument("--expired", action="store_true",
                        help="issue a certificate that expired before the signing time")
    parser.add_argument("--log-index", type=int, default=7)
    parser.add_argument("--tree-size", type=int, default=10)
    args = parser.parse_args(argv)
    if not 0 <= args.log_index < args.tree_size <= 100_000:
        parser.error("need 0 <= --log-index < --tree-size <= 100000")
    try:
        artifact = args.artifact.read_bytes()
    except OSError as exc:
        print(f"make_test_signature: error: cannot read {args.artifact}: {exc.strerror}", file=sys.stderr)
        return 1
    repository = args.source_repository
    if repository is None and (match := GITHUB_WORKFLOW.fullmatch(args.identity)):
        repository = match[1]
    deployment = Deployment(args.deployment)
    when = args.signing_time or datetime.now(UTC).replace(microsecond=0)
    bundle = sign(artifact, deployment, args.identity, args.issuer, repository, when,
                  expired=args.expired, log_index=args.log_index, tree_size=args.tree_size)
    args.bundle.write_text(json.dumps(bundle, indent=2) + "\n")
    args.trusted_root.write_text(json.dumps(deployment.trusted_root(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
