"""A Sigstore bundle over ``metadata.json``, verified offline with the ``sigstore``
library, the one ``kernels`` uses. Trust root: the one ``sigstore`` ships for Sigstore's
production instance (read from the package, never refreshed over the network: the
verification is offline and the same on every machine), or a private deployment's
``--trusted-root FILE``.

``kernels`` asks Sigstore's TUF repository for the production root online
(``Verifier.production()``); that root has held the Rekor v2 log
``log2025-1.rekor.sigstore.dev`` since 2025-09-22, and builds logged there verify only
under a root that has it. The first ``sigstore`` release that ships such a root is 4.2.0
(its embedded root is byte for byte the TUF repository's), hence pyproject.toml's floor;
a production root without that log (an older ``sigstore`` installed anyway) is refused
rather than used. docs/provenance.md says how an air-gapped site refreshes the root.

The bundle is verified over the exact bytes of ``metadata.json`` before anything in
them is read (as ``kernels`` does: a forged file never reaches the JSON parser).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from ..reading import parse_json, read_regular
from ..redaction import one_line
from .policy import Policy

if TYPE_CHECKING:
    from sigstore.models import TrustedRoot

#: Where ``sigstore`` keeps the production instance's trusted root (its TUF bootstrap).
_PRODUCTION = ("sigstore._store", "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev", "trusted_root.json")
PRODUCTION_ROOT = "sigstore-production"
#: The oldest ``sigstore`` whose production root ``kernels`` would accept today (above).
SIGSTORE_FLOOR = "4.2.0"
#: The Rekor v2 log of Sigstore's production root: its URL and log key id
#: (``tlogs[].baseUrl``, ``tlogs[].logId.keyId``).
REKOR_V2_LOG = ("https://log2025-1.rekor.sigstore.dev", "zxGZFVvd0FEmjR8WrFwMdcAJ9vtaY/QXf44Y1wUeP6A=")


class SignatureRefused(Exception):
    """The bundle does not prove the metadata.json: the reason, one line."""


@dataclass(frozen=True)
class Signed:
    identity: str
    issuer: str
    log_index: int | None
    integrated_time: int | None
    #: Which trust root: ``sigstore-production`` or ``sha256:<hex>`` of the root file.
    trust_root: str


def _root_bytes(policy: Policy) -> tuple[bytes, str]:
    if policy.trusted_root is None:
        package, folder, name = _PRODUCTION
        try:
            data = resources.files(package).joinpath(folder, name).read_bytes()
        except (OSError, ModuleNotFoundError) as exc:
            raise SignatureRefused(f"sigstore's production trust root is missing ({exc})") from None
        if not has_rekor_v2(data):
            raise SignatureRefused(
                f"the installed sigstore's production trust root predates the Rekor v2 log "
                f"{REKOR_V2_LOG[0]} that kernels trusts: install sigstore>={SIGSTORE_FLOOR}, or "
                "give --trusted-root FILE (docs/provenance.md)")
        return data, PRODUCTION_ROOT
    try:
        data = read_regular(policy.trusted_root, "the trusted root", SignatureRefused)
    except OSError as exc:
        raise SignatureRefused(f"cannot read the trusted root {policy.trusted_root}: "
                               f"{exc.strerror or exc}") from None
    return data, "sha256:" + hashlib.sha256(data).hexdigest()


@cache
def has_rekor_v2(root: bytes) -> bool:
    """Whether a trusted root (JSON) lists the production Rekor v2 log, by its key id."""
    try:
        tlogs = parse_json(root).get("tlogs")
    except (ValueError, AttributeError, RecursionError):
        return False
    return isinstance(tlogs, list) and any(
        isinstance(log, dict) and isinstance(log.get("logId"), dict)
        and log["logId"].get("keyId") == REKOR_V2_LOG[1] for log in tlogs)


@cache
def _trusted_root(data: bytes) -> TrustedRoot:
    from sigstore.models import TrustedRoot
    from sigstore_models.trustroot import v1

    return TrustedRoot(v1.TrustedRoot.from_json(data))


def verify_bundle(metadata: bytes, bundle: bytes, policy: Policy) -> Signed:
    """Verify ``bundle`` over ``metadata`` under ``policy``'s signers and trust root.
    Raises :class:`SignatureRefused` with the reason."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle, InvalidBundle
    from sigstore.verify import Verifier

    root_data, root_name = _root_bytes(policy)
    try:
        root = _trusted_root(root_data)
    except Exception as exc:  # pydantic, JSON and sigstore errors alike: a bad root file
        raise SignatureRefused(f"the trusted root {policy.trusted_root} is not a Sigstore "
                               f"trusted root: {one_line(str(exc), limit=160)}") from None
    try:
        parsed = Bundle.from_json(bundle)
    except InvalidBundle as exc:
        raise SignatureRefused(f"metadata.json.sigstore is not a Sigstore bundle: "
                               f"{one_line(str(exc), limit=160)}") from None
    except Exception as exc:  # hostile input: whatever the parsers raise is a refusal
        raise SignatureRefused(f"metadata.json.sigstore is not a Sigstore bundle: "
                               f"{one_line(str(exc), limit=160)}") from None
    try:
        Verifier(trusted_root=root).verify_artifact(metadata, parsed, policy.sigstore_policy())
    except SigstoreError as exc:
        raise SignatureRefused(_reason(str(exc))) from None
    except Exception as exc:  # a malformed certificate or entry deep in a valid-looking bundle
        raise SignatureRefused(f"the signature does not verify: {one_line(str(exc), limit=160)}") \
            from None
    identity, issuer = _signer(parsed.signing_certificate)
    entry = parse_json(parsed.to_json())["verificationMaterial"]["tlogEntries"][0]
    return Signed(identity, issuer, _int(entry.get("logIndex")), _int(entry.get("integratedTime")),
                  root_name)


def _reason(message: str) -> str:
    text = one_line(message, limit=200)
    if "policies succeeded" in text:
        return "signed by a signer the policy does not accept"
    if "digest mismatch" in text or "Signature is invalid for input" in text:
        return "the bundle does not sign this metadata.json (another artifact, or the file was changed)"
    if "not valid at validation time" in text or "expired at time of signing" in text:
        return f"the signing certificate was not valid when the entry was logged ({text})"
    return f"the signature does not verify: {text}"


def _signer(cert: object) -> tuple[str, str]:
    """The certificate's identity (its first URI or e-mail SAN) and OIDC issuer."""
    from cryptography import x509

    assert isinstance(cert, x509.Certificate)
    identity = ""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.UniformResourceIdentifier) or \
            san.get_values_for_type(x509.RFC822Name)
        identity = names[0] if names else ""
    except x509.ExtensionNotFound:
        pass
    issuer = ""
    try:
        ext = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1"))
        value = ext.value
        if isinstance(value, x509.UnrecognizedExtension):
            issuer = value.value.decode("utf-8", "replace")
    except x509.ExtensionNotFound:
        pass
    return identity, issuer


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
