"""Provenance: whether a build is what its signer says it is, and who that signer is.

- ``policy``: which signers are accepted (the ``kernels`` library's own default: the
  kernels-community build workflows on ``refs/heads/main`` through GitHub's OIDC issuer,
  plus ``--signer ISSUER=IDENTITY`` and a policy file) and what a policy requires
  (a signature, a trusted publisher, a clean build);
- ``signature``: a Sigstore bundle over ``metadata.json``, verified offline with the
  ``sigstore`` library against the trust root it ships (or ``--trusted-root FILE``);
- ``record``: the facts verified (signer, transparency log, publisher, dirty build,
  kernel commit, builder version) as a frozen dataclass and the dist-info file that
  carries them in a wheel (``kernel_wheels.verified.json``);
- ``verify``: a variant folder, or a variant's files inside a wheel, against a policy.

docs/provenance.md says what each guarantee means and does not mean.
"""

from __future__ import annotations

from .policy import Policy, Signer, parse_signer
from .record import VERIFIED_FILE, BuildFacts, Verification
from .variant import enforce, verify_files, verify_variant_folder

__all__ = ["VERIFIED_FILE", "BuildFacts", "Policy", "Signer", "Verification", "enforce",
           "parse_signer", "verify_files", "verify_variant_folder"]
