"""Provenance: Sigstore bundles over metadata.json, signer policies, trusted publishers
and dirty builds (docs/provenance.md). Every signature here is real: made by
scripts/make_test_signature.py under a test Sigstore deployment, checked by the real
``sigstore`` library."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sigstore.errors import VerificationError
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy

from kernel_wheels.errors import ProvenanceError
from kernel_wheels.provenance import BuildFacts, Policy, parse_signer, verify_variant_folder
from kernel_wheels.provenance.policy import KERNELS_SIGNERS
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


# -- the provenance wing: a variant folder against a policy ----------------------------------


def signed_variant(cpu_build: Path, tmp_path: Path, *extra: str | Path, identity: str = BUILD,
                   issuer: str = GITHUB, provenance: dict[str, object] | None = None) -> Path:
    """A copy of the sample kernel's CPU variant, its metadata.json signed (with
    ``provenance`` added to it first, when given); the deployment's root is
    tmp_path/root.json."""
    variant = tmp_path / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    if provenance is not None:
        meta = json.loads((variant / "metadata.json").read_text())
        meta["provenance"] = provenance
        (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    make_signature(variant / "metadata.json", variant / "metadata.json.sigstore", tmp_path / "root.json",
                   "--deployment", tmp_path / "keys", *extra, identity=identity, issuer=issuer)
    return variant


def folder_policy(tmp_path: Path, **options: object) -> Policy:
    return Policy(trusted_root=tmp_path / "root.json", **options)  # type: ignore[arg-type]


def test_signed_folder_verifies_and_records_the_signer(cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path, provenance={
        "kernel-builder": {"version": "0.12.3", "commit": "a" * 40, "dirty": False},
        "kernel": {"commit": "b" * 40, "dirty": False}})
    found = verify_variant_folder(variant, "drbh/img2gray", folder_policy(tmp_path))
    assert found.signed and found.identity == BUILD and found.issuer == GITHUB
    assert found.log_index == 7 and found.log_time and found.trust_root.startswith("sha256:")
    assert found.files_verified == len(json.loads((variant / "metadata.json").read_text())["digest"]["files"])
    assert found.build == BuildFacts(kernel_commit="b" * 40, builder_version="0.12.3",
                                     builder_commit="a" * 40, dirty=False)


def test_build_facts_read_as_kernels_reads_them(tmp_path: Path) -> None:
    """metadata.json's provenance as the kernels library's own parser reads it."""
    from kernels._rust import Metadata

    raw = {"name": "relu", "id": "_relu_x", "version": 1, "license": "MIT", "python-depends": [],
           "backend": {"type": "cpu"}, "provenance": {
               "kernel-builder": {"version": "0.12.3", "commit": "a" * 40, "dirty": True},
               "kernel": {"commit": "b" * 40, "dirty": False}}}
    theirs = Metadata.from_bytes(json.dumps(raw).encode()).provenance
    ours = BuildFacts.from_metadata(raw)
    assert theirs is not None and theirs.kernel is not None and theirs.kernel_builder.git is not None
    assert (ours.dirty, ours.kernel_commit, ours.builder_version, ours.builder_commit) == \
        (theirs.dirty, theirs.kernel.commit, theirs.kernel_builder.version, theirs.kernel_builder.git.commit)


def test_default_signers_are_the_kernels_librarys() -> None:
    from kernels.verify import DEFAULT_POLICIES

    theirs = [uri for p in DEFAULT_POLICIES for uri in p.signer_uris]  # type: ignore[attr-defined]
    assert list(KERNELS_SIGNERS) == theirs


@pytest.mark.parametrize("case, reason", [
    ("metadata", "does not sign this metadata.json"),
    ("file", "_ops.py differs from its signed digest"),
    ("extra", "extra.py is not covered by the signed digest"),
    ("missing", "_ops.py is in the signed digest but not in the variant"),
    ("identity", "signed by a signer the policy does not accept"),
    ("issuer", "signed by a signer the policy does not accept"),
    ("expired", "the signing certificate was not valid when the entry was logged"),
    ("other-artifact", "does not sign this metadata.json"),
    ("garbage", "metadata.json.sigstore is not a Sigstore bundle"),
    ("other-root", "the signature does not verify"),
])
def test_bad_signatures_are_refused_naming_kernel_variant_reason(
        cpu_build: Path, tmp_path: Path, case: str, reason: str) -> None:
    variant = signed_variant(
        cpu_build, tmp_path, *(["--expired"] if case == "expired" else []),
        identity=BUILD.replace("/huggingface/", "/someone/") if case == "identity" else BUILD,
        issuer="https://accounts.google.com" if case == "issuer" else GITHUB)
    if case == "metadata":
        (variant / "metadata.json").write_text((variant / "metadata.json").read_text().replace("Apache", "MIT"))
    elif case == "file":
        with (variant / "_ops.py").open("a") as stream:
            stream.write("import os  # injected\n")
    elif case == "extra":
        (variant / "extra.py").write_text("print('not signed')\n")
    elif case == "missing":
        (variant / "_ops.py").unlink()
    elif case == "other-artifact":
        other = tmp_path / "other.json"
        other.write_text('{"name": "img2gray", "digest": {"algorithm": "sha256", "files": {}}}\n')
        make_signature(other, variant / "metadata.json.sigstore", tmp_path / "root.json",
                       "--deployment", tmp_path / "keys")
    elif case == "garbage":
        (variant / "metadata.json.sigstore").write_bytes(b"\x00not a bundle{")
    elif case == "other-root":
        make_signature(variant / "metadata.json", tmp_path / "x.sigstore", tmp_path / "root.json")
    with pytest.raises(ProvenanceError) as refused:
        verify_variant_folder(variant, "drbh/img2gray", folder_policy(tmp_path))
    assert str(refused.value).startswith(f"drbh/img2gray {variant.name}: ")
    assert reason in str(refused.value)
    assert "\n" not in str(refused.value)


def test_other_signers_by_option(cpu_build: Path, tmp_path: Path) -> None:
    me = "https://github.com/acme/kernels/.github/workflows/release.yml@refs/tags/v1"
    variant = signed_variant(cpu_build, tmp_path, identity=me)
    with pytest.raises(ProvenanceError, match="does not accept"):
        verify_variant_folder(variant, "acme/relu", folder_policy(tmp_path))
    found = verify_variant_folder(variant, "acme/relu", folder_policy(
        tmp_path, signers=(parse_signer(f"{GITHUB}={me}"),)))
    assert found.identity == me


def test_unsigned_and_policy_requirements(cpu_build: Path, tmp_path: Path) -> None:
    variant = tmp_path / cpu_build.name
    shutil.copytree(cpu_build, variant)
    found = verify_variant_folder(variant, "drbh/img2gray", Policy())
    assert not found.signed and found.status == "unsigned"
    with pytest.raises(ProvenanceError, match=f"drbh/img2gray {variant.name}: unsigned"):
        verify_variant_folder(variant, "drbh/img2gray", Policy(require_signature=True))
    with pytest.raises(ProvenanceError, match="publisher 'drbh' is not a trusted publisher"):
        verify_variant_folder(variant, "drbh/img2gray", Policy(require_trusted_publisher=True),
                              publisher="drbh", trusted=False)
    assert verify_variant_folder(variant, "drbh/img2gray", Policy(
        require_trusted_publisher=True, trust_remote_code=True), publisher="drbh", trusted=False)


def test_dirty_build_recorded_and_refused_on_request(cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path, provenance={
        "kernel-builder": {"version": "0.12.3"}, "kernel": {"commit": "b" * 40, "dirty": True}})
    assert verify_variant_folder(variant, "k/k", folder_policy(tmp_path)).build.dirty is True
    with pytest.raises(ProvenanceError, match="built from a dirty git tree"):
        verify_variant_folder(variant, "k/k", folder_policy(tmp_path, require_clean=True))
