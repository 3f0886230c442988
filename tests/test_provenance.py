"""Provenance: Sigstore bundles over metadata.json, signer policies, trusted publishers
and dirty builds (docs/provenance.md). Every signature here is real: made by
scripts/make_test_signature.py under a test Sigstore deployment, checked by the real
``sigstore`` library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sigstore.errors import VerificationError
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy

from support.helpers import ROOT

GENERATOR = ROOT / "scripts" / "make_test_signature.py"
GITHUB = "https://token.actions.githubusercontent.com"
BUILD = "https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main"


def make_signature(artifact: Path, bundle: Path, root: Path, *extra: str | Path,
                   identity: str = BUILD, issuer: str = GITHUB) -> None:
    subprocess.run([sys.executable, str(GENERATOR), str(artifact), "--identity", identity,
                    "--issuer", issuer, "--bundle", str(bundle), "--trusted-root", str(root),
                    *map(str, extra)], check=True, capture_output=True, text=True)


def kernels_policy() -> policy.AnyOf:
    """The `kernels` library's own default policy (its verify.py), not ours."""
    from kernels.verify import DEFAULT_POLICIES

    return policy.AnyOf(list(DEFAULT_POLICIES))


def sigstore_verify(root: Path, bundle: Path, artifact: bytes) -> None:
    verifier = Verifier(trusted_root=TrustedRoot.from_file(str(root)))
    verifier.verify_artifact(artifact, Bundle.from_json(bundle.read_bytes()), kernels_policy())


# -- the fixture generator, against sigstore itself -----------------------------------------


def test_generator_bundle_verifies_with_sigstore_and_kernels_policy(tmp_path: Path) -> None:
    artifact = tmp_path / "metadata.json"
    artifact.write_text('{"name": "relu"}\n')
    make_signature(artifact, tmp_path / "b.sigstore", tmp_path / "root.json")
    sigstore_verify(tmp_path / "root.json", tmp_path / "b.sigstore", artifact.read_bytes())


@pytest.mark.parametrize("case, expected", [
    ("tampered", "digest mismatch"),
    ("expired", "not valid at validation time"),
    ("identity", "policies succeeded"),
    ("issuer", "policies succeeded"),
    ("other-root", "signature does not match"),
])
def test_generator_bad_cases_fail_in_sigstore(tmp_path: Path, case: str, expected: str) -> None:
    artifact = tmp_path / "metadata.json"
    artifact.write_text('{"name": "relu"}\n')
    bundle, root = tmp_path / "b.sigstore", tmp_path / "root.json"
    extra: list[str] = ["--expired"] if case == "expired" else []
    make_signature(artifact, bundle, root, *extra,
                   identity=BUILD.replace("huggingface", "someone") if case == "identity" else BUILD,
                   issuer="https://accounts.google.com" if case == "issuer" else GITHUB)
    data = artifact.read_bytes()
    if case == "tampered":
        data = data.replace(b"relu", b"gelu")
    if case == "other-root":
        make_signature(artifact, tmp_path / "other.sigstore", root)  # a new deployment
    with pytest.raises(VerificationError, match=expected):
        sigstore_verify(root, bundle, data)


def test_generator_deployment_is_reused(tmp_path: Path) -> None:
    """--deployment DIR: a second file signed under the first one's trusted root."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("{}\n")
    second.write_text('{"other": 1}\n')
    make_signature(first, tmp_path / "a.sigstore", tmp_path / "root.json", "--deployment", tmp_path / "keys")
    make_signature(second, tmp_path / "b.sigstore", tmp_path / "root2.json", "--deployment", tmp_path / "keys")
    sigstore_verify(tmp_path / "root.json", tmp_path / "b.sigstore", second.read_bytes())
    assert json.loads((tmp_path / "root.json").read_text())["tlogs"] == \
        json.loads((tmp_path / "root2.json").read_text())["tlogs"]
