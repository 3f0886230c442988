"""Which signers a build may come from, and what a policy requires of a build.

The default signer policy is the ``kernels`` library's (its ``verify.py``,
``DEFAULT_POLICIES``): a certificate issued through GitHub's OIDC issuer for a workflow
of huggingface/kernels-community on ``refs/heads/main``. ``--signer ISSUER=IDENTITY``
(repeatable) and a policy file add signers: an identity is the certificate's subject
alternative name (a workflow URI, an e-mail address) as Sigstore's ``Identity`` policy
matches it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..confine import shown
from ..errors import UsageError
from ..reading import not_a_file, parse_toml, read_regular, read_text

if TYPE_CHECKING:
    from sigstore.verify.policy import VerificationPolicy

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
KERNELS_COMMUNITY = "https://github.com/huggingface/kernels-community"
#: The `kernels` library's curated signer workflows (kernels 0.17, verify.py), same order.
KERNELS_SIGNERS = tuple(
    f"{KERNELS_COMMUNITY}/.github/workflows/{workflow}.yaml@refs/heads/main"
    for workflow in ("build", "build-mac", "build-windows", "sign-old-builds"))


@dataclass(frozen=True)
class Signer:
    """An accepted signer: the OIDC issuer and the certificate identity (SAN)."""

    issuer: str
    identity: str

    def __str__(self) -> str:
        return f"{self.issuer}={self.identity}"


@dataclass(frozen=True)
class Policy:
    """What a build must prove before it becomes a wheel (to-wheel) or is trusted again
    (check, verify). The default is the ``kernels`` library's: signatures checked when
    present, kernels-community's signers accepted, nothing required."""

    #: Signers accepted besides the default ones.
    signers: tuple[Signer, ...] = ()
    #: Accept the ``kernels`` library's default signers (a policy file may say no).
    kernels_signers: bool = True
    #: A private Sigstore deployment's trusted root (JSON); None: Sigstore's production root.
    trusted_root: Path | None = None
    require_signature: bool = False
    require_trusted_publisher: bool = False
    #: ``kernels``' ``trust_remote_code=True``: an untrusted publisher is accepted even
    #: where the policy requires trusted publishers.
    trust_remote_code: bool = False
    require_clean: bool = False
    #: Repositories accepted without a trusted publisher (``kernels``' allowlist form
    #: of trust_remote_code).
    trusted_repos: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.signers and not self.kernels_signers:
            raise UsageError("the policy accepts no signer: add --signer ISSUER=IDENTITY or "
                             "keep the kernels-community signers")

    def sigstore_policy(self) -> VerificationPolicy:
        """The policy as Sigstore's: any accepted signer."""
        from sigstore.verify import policy

        accepted: list[VerificationPolicy] = []
        if self.kernels_signers:
            accepted.append(policy.AllOf([
                policy.OIDCIssuer(GITHUB_ISSUER),
                policy.OIDCIssuerV2(GITHUB_ISSUER),
                policy.OIDCSourceRepositoryURI(KERNELS_COMMUNITY),
                policy.AnyOf([policy.OIDCBuildSignerURI(uri) for uri in KERNELS_SIGNERS]),
            ]))
        accepted += [policy.Identity(identity=s.identity, issuer=s.issuer) for s in self.signers]
        return policy.AnyOf(accepted)

    def to_dict(self) -> dict[str, Any]:
        """As JSON (``serve`` hands its settings to its worker processes so)."""
        return {"signers": [str(s) for s in self.signers], "kernels_signers": self.kernels_signers,
                "trusted_root": str(self.trusted_root) if self.trusted_root else None,
                "require_signature": self.require_signature,
                "require_trusted_publisher": self.require_trusted_publisher,
                "trust_remote_code": self.trust_remote_code, "require_clean": self.require_clean,
                "trusted_repos": list(self.trusted_repos)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Policy:
        return cls(signers=tuple(parse_signer(s) for s in raw["signers"]),
                   kernels_signers=bool(raw["kernels_signers"]),
                   trusted_root=Path(raw["trusted_root"]) if raw["trusted_root"] else None,
                   require_signature=bool(raw["require_signature"]),
                   require_trusted_publisher=bool(raw["require_trusted_publisher"]),
                   trust_remote_code=bool(raw["trust_remote_code"]),
                   require_clean=bool(raw["require_clean"]),
                   trusted_repos=tuple(raw["trusted_repos"]))

    def fingerprint(self) -> str:
        """A digest of everything this policy decides by (its trusted root's bytes too,
        not only its path): a verdict kept under one fingerprint holds for that policy
        alone (``serve``'s cache, a mirror's destination)."""
        import hashlib

        text = json.dumps(self.to_dict(), sort_keys=True)
        if self.trusted_root is not None:
            try:
                text += hashlib.sha256(read_regular(self.trusted_root, "the trusted root",
                                                    UsageError)).hexdigest()
            except OSError as exc:
                raise UsageError(f"--trusted-root {self.trusted_root}: {exc.strerror or exc}") from None
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def accepts_untrusted(self, repo_id: str | None) -> bool:
        """Whether an untrusted (or unknown) publisher passes this policy."""
        return (not self.require_trusted_publisher or self.trust_remote_code
                or (repo_id is not None and repo_id in self.trusted_repos))


def parse_signer(text: str) -> Signer:
    """``ISSUER=IDENTITY``: the issuer is a URL (it holds no ``=``), the identity the rest."""
    issuer, sep, identity = text.partition("=")
    if not sep or not issuer.startswith(("https://", "http://")) or not identity.strip():
        raise UsageError(f"--signer '{shown(text)}': give ISSUER=IDENTITY, e.g. "
                         f"{GITHUB_ISSUER}=https://github.com/ORG/REPO/.github/workflows/"
                         "build.yaml@refs/heads/main")
    return Signer(issuer, identity)


_FILE_KEYS = {"signers", "kernels-signers", "trusted-root", "require-signature",
              "require-trusted-publisher", "trust-remote-code", "require-clean", "trusted-repos"}


def load_policy_file(path: Path) -> Policy:
    """A policy file (TOML, docs/provenance.md)::

        kernels-signers = true
        signers = ["https://token.actions.githubusercontent.com=https://github.com/..."]
        trusted-root = "root.json"        # relative to the file
        require-signature = true
        require-trusted-publisher = true
        trusted-repos = ["my-org/my-kernel"]
        require-clean = true
    """
    try:
        raw = parse_toml(read_text(path, "the policy file", UsageError))
    except OSError as exc:
        raise UsageError(f"cannot read the policy file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not TOML, or nested too deeply
        raise UsageError(f"the policy file {path} is not valid TOML: {shown(str(exc))}") from None
    unknown = sorted(set(raw) - _FILE_KEYS)
    if unknown:
        raise UsageError(f"the policy file {path}: unknown key '{shown(unknown[0])}' "
                         f"(known: {', '.join(sorted(_FILE_KEYS))})")

    def flag(key: str, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            raise UsageError(f"the policy file {path}: '{key}' must be true or false")
        return value

    def strings(key: str) -> list[str]:
        value: Any = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"the policy file {path}: '{key}' must be a list of strings")
        return value

    root = raw.get("trusted-root")
    if root is not None and not isinstance(root, str):
        raise UsageError(f"the policy file {path}: 'trusted-root' must be a path")
    return Policy(
        signers=tuple(parse_signer(s) for s in strings("signers")),
        kernels_signers=flag("kernels-signers", True),
        trusted_root=(path.parent / root) if root else None,
        require_signature=flag("require-signature", False),
        require_trusted_publisher=flag("require-trusted-publisher", False),
        trust_remote_code=flag("trust-remote-code", False),
        require_clean=flag("require-clean", False),
        trusted_repos=tuple(strings("trusted-repos")),
    )


def combined(base: Policy | None, *, signers: tuple[Signer, ...] = (),
             trusted_root: Path | None = None, require_signature: bool = False,
             require_trusted_publisher: bool = False, trust_remote_code: bool = False,
             require_clean: bool = False) -> Policy:
    """A policy file's policy tightened (never loosened) by command-line options; a
    command-line trusted root replaces the file's."""
    base = base or Policy()
    return replace(
        base,
        signers=base.signers + tuple(s for s in signers if s not in base.signers),
        trusted_root=trusted_root or base.trusted_root,
        require_signature=base.require_signature or require_signature,
        require_trusted_publisher=base.require_trusted_publisher or require_trusted_publisher,
        trust_remote_code=base.trust_remote_code or trust_remote_code,
        require_clean=base.require_clean or require_clean,
    )


@dataclass(frozen=True)
class PolicyOptions:
    """A command's provenance options as given (``--policy``, ``--signer``,
    ``--trusted-root``, ``--require-*``, ``--trust-remote-code``): :meth:`resolve` gives
    the policy they mean."""

    policy_file: Path | None = None
    #: ``ISSUER=IDENTITY`` texts.
    signers: tuple[str, ...] = ()
    trusted_root: Path | None = None
    require_signature: bool = False
    require_trusted_publisher: bool = False
    trust_remote_code: bool = False
    require_clean: bool = False

    def resolve(self) -> Policy:
        """The policy file's policy tightened by the other options; a trusted root that is
        not a file (given, or named by the file) is a usage error."""
        base = load_policy_file(self.policy_file) if self.policy_file is not None else None
        if self.trusted_root is not None and not self.trusted_root.is_file():
            raise UsageError(f"--trusted-root {self.trusted_root}: {not_a_file(self.trusted_root)}")
        found = combined(base, signers=tuple(parse_signer(s) for s in self.signers),
                         trusted_root=self.trusted_root, require_signature=self.require_signature,
                         require_trusted_publisher=self.require_trusted_publisher,
                         trust_remote_code=self.trust_remote_code, require_clean=self.require_clean)
        if found.trusted_root is not None and not found.trusted_root.is_file():
            raise UsageError(f"the policy file's trusted-root {found.trusted_root}: "
                             f"{not_a_file(found.trusted_root)}")
        return found
