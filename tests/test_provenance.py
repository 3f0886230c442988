"""Provenance: Sigstore bundles over metadata.json, signer policies, trusted publishers
and dirty builds (docs/provenance.md). Every signature here is real: made by
scripts/make_test_signature.py under a test Sigstore deployment, checked by the real
``sigstore`` library."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from sigstore.errors import VerificationError
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy
from test_check import rewrite

from kernel_wheels.errors import ProvenanceError
from kernel_wheels.kernel.digest import sha256_b64
from kernel_wheels.provenance import BuildFacts, Policy, parse_signer, verify_variant_folder
from kernel_wheels.provenance.policy import KERNELS_SIGNERS
from support.helpers import ROOT, UV, make_venv, one_line_error, run_cli, torch_wheel
from support.hostile_hub import REPO, VARIANT, Answer, HostileHub, Repo, honest_files, hostile_hub
from support.servers_serve import JSON_TYPE, get, serve

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


def test_a_link_out_of_the_folder_is_refused_not_followed(cpu_build: Path, tmp_path: Path) -> None:
    """A variant folder (an installed kernel's, say) whose _ops.py is a link to a file
    outside it with the same bytes: the one folder walk refuses it, naming it, instead of
    hashing what lies outside (#36's one walk, used by the digest too)."""
    variant = signed_variant(cpu_build, tmp_path)
    outside = tmp_path / "elsewhere.py"
    outside.write_bytes((variant / "_ops.py").read_bytes())
    (variant / "_ops.py").unlink()
    (variant / "_ops.py").symlink_to(outside)
    with pytest.raises(ProvenanceError, match=r"_ops\.py is a symbolic link that leads outside the variant "
                                              "folder; refusing to verify it"):
        verify_variant_folder(variant, "drbh/img2gray", folder_policy(tmp_path))


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
    ("huge", "bytes, not a Sigstore bundle (at most 1048576)"),
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
    elif case == "huge":
        (variant / "metadata.json.sigstore").write_bytes(b" " * (1 << 20) + b"{}")
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


# -- to-wheel and check, the commands -------------------------------------------------------


def verified_record(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/kernel_wheels.verified.json"))
        return json.loads(archive.read(name))


def to_wheel(source: Path, out: Path, *options: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("to-wheel", source, "1.0.0", "-o", out, *options, check=False)


def test_to_wheel_records_a_verified_signature_and_check_reverifies_it(
        cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path / "k", provenance={
        "kernel-builder": {"version": "0.12.3"}, "kernel": {"commit": "b" * 40, "dirty": False}})
    source, root = variant.parent.parent, tmp_path / "k" / "root.json"
    proc = to_wheel(source, tmp_path / "out", "--trusted-root", root, "--require-signature",
                    "--require-clean")
    assert proc.returncode == 0, proc.stderr
    assert "unsigned" not in proc.stderr
    wheel = next((tmp_path / "out").glob("*.whl"))
    record = verified_record(wheel)
    assert record["status"] == "signed" and record["identity"] == BUILD and record["issuer"] == GITHUB
    assert record["kernel"] == "k" and record["variant"] == f"build/{variant.name}"
    assert record["log_index"] == 7 and isinstance(record["log_time"], int)
    assert record["build"] == {"kernel_commit": "b" * 40, "builder_version": "0.12.3",
                               "builder_commit": None, "dirty": False}
    assert record["files_verified"] == 3
    # The original bundle travels unchanged beside metadata.json.
    with zipfile.ZipFile(wheel) as archive:
        packed = archive.read(f"img2gray/{variant.name}/metadata.json.sigstore")
    assert packed == (variant / "metadata.json.sigstore").read_bytes()
    # Reproducible: the same release and options give the same bytes.
    again = to_wheel(source, tmp_path / "again", "--trusted-root", root)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / wheel.name).read_bytes() == wheel.read_bytes()

    checked = run_cli("check", "-v", wheel, "--trusted-root", root, "--require-signature")
    assert f"pass: [provenance] k build/{variant.name}: signed by {BUILD}" in checked.stdout
    # Offline against Sigstore's production root, the test deployment's signature is refused.
    refused = run_cli("check", wheel, check=False)
    assert refused.returncode == 1 and "fail: [provenance]" in refused.stdout


@pytest.mark.parametrize("case, reason", [
    ("metadata", "the bundle does not sign this metadata.json"),
    ("file", "_ops.py differs from its signed digest"),
    ("identity", "signed by a signer the policy does not accept"),
    ("issuer", "signed by a signer the policy does not accept"),
    ("expired", "the signing certificate was not valid when the entry was logged"),
    ("other-artifact", "the bundle does not sign this metadata.json"),
    ("garbage", "metadata.json.sigstore is not a Sigstore bundle"),
    ("huge", "bytes, not a Sigstore bundle (at most 1048576)"),
])
def test_to_wheel_refuses_what_does_not_verify(cpu_build: Path, tmp_path: Path, case: str,
                                               reason: str) -> None:
    variant = signed_variant(
        cpu_build, tmp_path / "k", *(["--expired"] if case == "expired" else []),
        identity=BUILD.replace("/huggingface/", "/someone/") if case == "identity" else BUILD,
        issuer="https://accounts.google.com" if case == "issuer" else GITHUB)
    keys, root = tmp_path / "k" / "keys", tmp_path / "k" / "root.json"
    if case == "metadata":
        (variant / "metadata.json").write_text((variant / "metadata.json").read_text().replace("Apache", "MIT"))
    elif case == "file":
        with (variant / "_ops.py").open("a") as stream:
            stream.write("import os  # injected\n")
    elif case == "other-artifact":
        other = tmp_path / "other.json"
        other.write_text('{"name": "img2gray"}\n')
        make_signature(other, variant / "metadata.json.sigstore", root, "--deployment", keys)
    elif case == "garbage":
        (variant / "metadata.json.sigstore").write_text('{"mediaType": "nonsense"}')
    elif case == "huge":
        (variant / "metadata.json.sigstore").write_bytes(b" " * (1 << 20) + b"{}")
    # --no-check: the signed digests are compared whatever the checks do.
    proc = to_wheel(variant.parent.parent, tmp_path / "out", "--trusted-root", root, "--no-check")
    one_line_error(proc, f"k build/{variant.name}: ", reason, status=1)
    assert not list((tmp_path / "out").glob("*.whl")) if (tmp_path / "out").exists() else True


def test_unsigned_converts_with_a_note_and_require_signature_refuses(
        cpu_build: Path, tmp_path: Path) -> None:
    source = tmp_path / "k"
    shutil.copytree(cpu_build, source / "build" / cpu_build.name)
    proc = to_wheel(source, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {source}: 1 of 1 variant(s) unsigned (no metadata.json.sigstore); recorded in "
                     "each wheel (--require-signature, --require-trusted-publisher refuse them)"]
    assert verified_record(next((tmp_path / "out").glob("*.whl")))["status"] == "unsigned"
    refused = to_wheel(source, tmp_path / "strict", "--require-signature")
    one_line_error(refused, f"k build/{cpu_build.name}: unsigned (no metadata.json.sigstore) and the "
                            "policy requires a signature", status=1)
    assert not (tmp_path / "strict").exists() or not list((tmp_path / "strict").iterdir())
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("require-signature = true\n")
    one_line_error(to_wheel(source, tmp_path / "strict", "--policy", policy_file),
                   "the policy requires a signature", status=1)
    # check takes the same options.
    wheel = next((tmp_path / "out").glob("*.whl"))
    checked = run_cli("check", wheel, "--require-signature", check=False)
    assert checked.returncode == 1 and "unsigned (no metadata.json.sigstore) and the policy requires" \
        in checked.stdout


def test_check_refuses_a_record_that_lies(cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path / "k")
    root = tmp_path / "k" / "root.json"
    assert to_wheel(variant.parent.parent, tmp_path / "out", "--trusted-root", root).returncode == 0
    wheel = next((tmp_path / "out").glob("*.whl"))
    record = verified_record(wheel)
    record["log_index"] = 1234
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith("kernel_wheels.verified.json"))
    lying = rewrite(wheel, tmp_path / wheel.name, {name: json.dumps(record).encode()}, update_record=True)
    proc = run_cli("check", lying, "--trusted-root", root, check=False)
    assert proc.returncode == 1
    assert "kernel_wheels.verified.json says log_index 1234, but the wheel verifies as 7" in proc.stdout


@pytest.mark.parametrize("options", [(), ("--signer", "https://accounts.google.com=a@b.c")])
def test_policy_options_are_checked_up_front(tmp_path: Path, options: tuple[str, ...]) -> None:
    """A bad --signer, a missing --trusted-root or policy file: usage errors (2)."""
    bad = [("--signer", "no-equals-sign"), ("--trusted-root", tmp_path / "nope.json"),
           ("--policy", tmp_path / "nope.toml")]
    for option, value in bad:
        proc = run_cli("to-wheel", tmp_path, "1.0.0", "-o", tmp_path / "out", *options, option, value,
                       check=False)
        one_line_error(proc, status=2)


# -- a Hub source: the publisher's trust, asked as the kernels library asks -----------------


@pytest.fixture(scope="module")
def hub() -> Iterator[HostileHub]:
    with hostile_hub() as server:
        yield server


def signed_repo(tmp_path: Path) -> Repo:
    """The hostile Hub's honest kernel, with digests in its metadata.json, signed."""
    files = honest_files()
    prefix = f"build/{VARIANT}/"
    digest = {path[len(prefix):]: sha256_b64([content]) for path, content in files.items()
              if path.startswith(prefix) and not path.endswith("metadata.json")}
    meta = json.loads(files[prefix + "metadata.json"])
    meta["digest"] = {"algorithm": "sha256", "files": digest}
    files[prefix + "metadata.json"] = json.dumps(meta).encode()
    (tmp_path / "metadata.json").write_bytes(files[prefix + "metadata.json"])
    make_signature(tmp_path / "metadata.json", tmp_path / "bundle", tmp_path / "root.json")
    files[prefix + "metadata.json.sigstore"] = (tmp_path / "bundle").read_bytes()
    return Repo(files=files)


def hub_convert(hub: HostileHub, tmp_path: Path, *options: str | Path) -> subprocess.CompletedProcess[str]:
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
           "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    return run_cli("to-wheel", REPO, "1.0.0", "-o", tmp_path / "out", "--timeout", "5", "--retries", "0",
                   "--trusted-root", tmp_path / "root.json", *options, env=env, check=False)


def test_hub_publisher_not_trusted_is_recorded_and_refused_on_request(hub: HostileHub, tmp_path: Path) -> None:
    hub.reset(signed_repo(tmp_path))
    proc = hub_convert(hub, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note: evil/kernel: publisher 'evil' is not a trusted publisher on the Hub" in proc.stderr
    record = verified_record(next((tmp_path / "out").glob("*.whl")))
    assert (record["status"], record["publisher"], record["trusted_publisher"]) == ("signed", "evil", False)
    assert "/api/organizations/evil/overview" in [path for path, _ in hub.requests]
    refused = hub_convert(hub, tmp_path, "--require-trusted-publisher", "--force")
    one_line_error(refused, f"evil/kernel build/{VARIANT}: publisher 'evil' is not a trusted publisher "
                            "on the Hub (--trust-remote-code accepts it)", status=1)
    allowed = hub_convert(hub, tmp_path, "--require-trusted-publisher", "--trust-remote-code")
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize("answer, trusted", [
    (Answer.json({"name": "evil", "fullname": "Evil", "avatarUrl": "", "trustedKernelPublisher": True}), True),
    (Answer.json({"name": "evil", "fullname": "Evil", "avatarUrl": "", "trustedKernelPublisher": "yes"}), False),
    (Answer(500, b"down"), None),
    (Answer(200, b"<html>not json</html>", {"Content-Type": "text/html"}), None),
])
def test_hub_trusted_flag_read_strictly(hub: HostileHub, tmp_path: Path, answer: Answer,
                                        trusted: bool | None) -> None:
    """Only the Hub's own true makes a trusted publisher; an error is "unknown", which a
    policy requiring trusted publishers refuses too (as kernels does)."""
    hub.reset(signed_repo(tmp_path))
    hub.override("overview:evil", answer)
    proc = hub_convert(hub, tmp_path, *(["--require-trusted-publisher"] if trusted else []))
    assert proc.returncode == 0, proc.stderr
    assert verified_record(next((tmp_path / "out").glob("*.whl")))["trusted_publisher"] is trusted
    if not trusted:
        strict = hub_convert(hub, tmp_path, "--require-trusted-publisher", "--force")
        one_line_error(strict, "publisher 'evil'", status=1)


def test_hub_tampered_file_refused(hub: HostileHub, tmp_path: Path) -> None:
    repo = signed_repo(tmp_path)
    repo.files[f"build/{VARIANT}/kernel/_ops.py"] = b"import os; os.system('id')\n"
    hub.reset(repo)
    proc = hub_convert(hub, tmp_path)
    one_line_error(proc, f"evil/kernel build/{VARIANT}: kernel/_ops.py differs from its signed digest",
                   status=1)


# -- kernel-wheels verify: wheels, a folder, the kernels installed in a Python --------------


def test_verify_wheels_folder_and_installed_kernels(cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path / "k")
    root = tmp_path / "k" / "root.json"
    assert to_wheel(variant.parent.parent, tmp_path / "site" / "files", "--trusted-root", root).returncode == 0
    wheel = next((tmp_path / "site" / "files").glob("*.whl"))

    passed = run_cli("verify", tmp_path / "site", "--trusted-root", root, "--require-signature")
    assert passed.stdout == (f"VERIFIED {wheel.name}: signed by {BUILD} ({GITHUB}), transparency log "
                             "entry 7; every file is signed or derived again\n")
    assert "1 verified, 0 unsigned, 0 not verified, 0 failed" in passed.stderr
    report = json.loads(run_cli("verify", wheel, "--trusted-root", root, "--json").stdout)
    assert report[0]["passed"] and report[0]["provenance"]["identity"] == BUILD
    assert report[0]["proof"] == "verified"
    # Another signer policy: the same wheel fails, one line, exit 1.
    other = run_cli("verify", wheel, "--trusted-root", root, "--policy", _policy(tmp_path), check=False)
    assert other.returncode == 1
    assert other.stdout.startswith(f"FAILED {wheel.name}: [provenance] k build/{variant.name}: signed by "
                                   "a signer the policy does not accept")

    python = make_venv(tmp_path / "venv")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    installed = json.loads(run_cli("verify", "--python", python, "--trusted-root", root, "--json").stdout)
    assert [(row["proof"], row["provenance"]["status"]) for row in installed] == [("verified", "signed")]
    said = run_cli("verify", "--python", python, "--trusted-root", root)
    assert said.stdout == (f"VERIFIED img2gray: signed by {BUILD} ({GITHUB}), transparency log entry 7; "
                           "the variant folder is as signed, the code kernel-wheels wrote derived again, "
                           "every installed file is as its RECORD lists it\n")
    ops = Path(installed[0]["path"]) / "_ops.py"
    ops.write_text(ops.read_text() + "import os  # changed after installing\n")
    changed = run_cli("verify", "--python", python, "--trusted-root", root, check=False)
    assert changed.returncode == 1
    assert f"img2gray/{variant.name}/_ops.py was edited since it was installed" in changed.stdout
    assert f"k build/{variant.name}: _ops.py differs from its signed digest" in changed.stdout


def _install(installer: str, python: Path, wheel: Path) -> None:
    """``wheel`` installed into ``python`` as a user installs it (pip compiles byte-code and
    lists it in RECORD; uv does neither)."""
    command = [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)] if installer == "pip" \
        else [UV, "pip", "install", "-q", "--no-deps", "--python", str(python), str(wheel)]
    subprocess.run(command, check=True, capture_output=True)


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_verify_installed_compares_every_file_with_its_record(cpu_build: Path, tmp_path: Path,
                                                              installer: str) -> None:
    """verify --python holds every installed file of a kernel, signed or not, to the
    RECORD its installer wrote (as pip's RECORD and debsums promise), and the code
    kernel-wheels wrote to what it derives: an edit, a removal or an added file fails,
    named; the byte-code caches Python writes do not."""
    source = tmp_path / "k"
    shutil.copytree(cpu_build, source / "build" / cpu_build.name)
    assert to_wheel(source, tmp_path / "out").returncode == 0
    python = make_venv(tmp_path / "venv")
    _install(installer, python, next((tmp_path / "out").glob("*.whl")))
    subprocess.run([str(python), "-m", "compileall", "-q", str(tmp_path / "venv")], check=True,
                   capture_output=True)  # __pycache__ beside every source, as imports leave them

    intact = run_cli("verify", "--python", python)
    assert intact.stdout == ("UNSIGNED img2gray: no signature covers it (no metadata.json.sigstore); "
                             "every installed file is as its RECORD lists it\n")
    assert "0 verified, 1 unsigned, 0 not verified, 0 failed" in intact.stderr

    site = Path(json.loads(run_cli("verify", "--python", python, "--json").stdout)[0]["path"]).parent.parent
    folder = f"img2gray/{cpu_build.name}"
    with (site / folder / "_ops.py").open("a") as stream:
        stream.write("import os  # changed after installing\n")
    (site / "img2gray" / "extra.py").write_text("print('planted')\n")
    binary = next(p for p in (site / folder).rglob("*.so"))
    binary.unlink()
    # The loader edited, and RECORD rewritten to match it: the derivation still tells.
    loader = site / "img2gray" / "__init__.py"
    loader.write_text(loader.read_text() + "import os  # also changed\n")
    (record,) = site.glob("img2gray-*.dist-info/RECORD")
    digest = base64.urlsafe_b64encode(hashlib.sha256(loader.read_bytes()).digest()).rstrip(b"=").decode()
    rows = [row if not row.startswith("img2gray/__init__.py,") else
            f"img2gray/__init__.py,sha256={digest},{loader.stat().st_size}"
            for row in record.read_text().splitlines()]
    record.write_text("\n".join(rows) + "\n")

    changed = run_cli("verify", "--python", python, check=False)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "0 verified, 0 unsigned, 0 not verified, 1 failed" in changed.stderr
    assert changed.stdout.startswith("FAILED img2gray: ")
    for line in (f"{folder}/_ops.py was edited since it was installed (its sha256 is not the one "
                 "RECORD lists)",
                 f"{binary.relative_to(site)} is missing: it was installed and has been removed since",
                 "img2gray/extra.py was not installed by it: it was added since (RECORD does not list it)",
                 "img2gray/__init__.py differs from what kernel-wheels derives from its records (the "
                 "code that runs on import)"):
        assert line in changed.stdout, changed.stdout
    assert "__pycache__" not in changed.stdout and ".pyc" not in changed.stdout
    report = json.loads(run_cli("verify", "--python", python, "--json", check=False).stdout)
    assert [(row["proof"], len(row["failures"])) for row in report] == [("failed", 4)]


#: Run in the kernel's venv: a .pyc for SOURCE holding other code, with SOURCE's own mtime
#: and size in its header, so that the import runs it instead of the source.
_PLANT_PYC = """
import importlib._bootstrap_external as external, importlib.util, os, sys
source = sys.argv[1]
found = os.stat(source)
code = compile("import os\\nopen(os.environ['KW_MARK'], 'a').write('ran')\\n", source, "exec")
with open(importlib.util.cache_from_source(source), "wb") as stream:
    stream.write(external._code_to_timestamp_pyc(code, found.st_mtime, found.st_size))
"""


def test_verify_installed_finds_byte_code_python_would_run_instead_of_the_source(
        cpu_build: Path, tmp_path: Path) -> None:
    """A .pyc in __pycache__ whose header matches the installed source (so import runs it,
    and the source is never read) but whose code is another: verify --python compiles the
    source in the target Python and compares; a sourceless .pyc beside the package's files
    is named too. Caches that are stale (an edited source) or match are not findings."""
    source = tmp_path / "k"
    shutil.copytree(cpu_build, source / "build" / cpu_build.name)
    assert to_wheel(source, tmp_path / "out").returncode == 0
    python = make_venv(tmp_path / "venv")
    _install("uv", python, next((tmp_path / "out").glob("*.whl")))
    site = Path(json.loads(run_cli("verify", "--python", python, "--json").stdout)[0]["path"]).parent.parent
    ops = site / "img2gray" / cpu_build.name / "_ops.py"
    subprocess.run([str(python), "-m", "compileall", "-q", str(site / "img2gray")], check=True, capture_output=True)
    assert run_cli("verify", "--python", python).returncode == 0  # caches that match: fine
    subprocess.run([str(python), "-c", _PLANT_PYC, str(ops)], check=True, capture_output=True)
    mark = tmp_path / "mark"
    load = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('ops', sys.argv[1]); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))")  # as import loads it
    subprocess.run([str(python), "-c", load, str(ops)], check=True, capture_output=True,
                   env={**os.environ, "KW_MARK": str(mark)})
    assert mark.read_text() == "ran"  # the planted byte-code ran, the source did not
    (site / "img2gray" / "helper.pyc").write_bytes(b"\0" * 16)
    proc = run_cli("verify", "--python", python, check=False)
    assert proc.returncode == 1 and proc.stdout.startswith("FAILED img2gray: "), proc.stdout
    pyc = f"img2gray/{cpu_build.name}/__pycache__/_ops.{sys.implementation.cache_tag}.pyc"
    assert f"{pyc} is byte-code that is not what the source beside it compiles to: Python would run " \
           "it instead of the source" in proc.stdout, proc.stdout
    assert "img2gray/helper.pyc is byte-code outside __pycache__, which Python imports where no source " \
           "is" in proc.stdout, proc.stdout


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "only-acme.toml"
    path.write_text('kernels-signers = false\nsigners = ["https://token.actions.githubusercontent.com='
                    'https://github.com/acme/k/.github/workflows/b.yml@refs/heads/main"]\n')
    return path


def test_index_pages_carry_the_provenance_summary(cpu_build: Path, tmp_path: Path) -> None:
    variant = signed_variant(cpu_build, tmp_path / "k")
    root = tmp_path / "k" / "root.json"
    assert to_wheel(variant.parent.parent, tmp_path / "out", "--trusted-root", root).returncode == 0
    run_cli("index", tmp_path / "out", "-o", tmp_path / "site", "--trusted-root", root,
            "--require-signature")
    page = json.loads((tmp_path / "site" / "simple" / "img2gray" / "index.json").read_text())
    assert [f["_provenance"] for f in page["files"]] == [{
        "status": "signed", "identity": BUILD, "issuer": GITHUB, "log_index": 7,
        "trusted_publisher": None, "dirty": None}]
    # Under Sigstore's production root (the default) the test deployment's signature is
    # refused: the site is not changed.
    refused = run_cli("index", tmp_path / "out", "-o", tmp_path / "site2", check=False)
    one_line_error(refused, "[provenance] k build/", "the signature does not verify", status=1)
    assert not (tmp_path / "site2").exists()


def test_install_verifies_before_installing(cpu_build: Path, tmp_path: Path,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    variant = signed_variant(cpu_build, tmp_path / "k")
    root = tmp_path / "k" / "root.json"
    assert to_wheel(variant.parent.parent, tmp_path / "wheels", "--trusted-root", root).returncode == 0
    python = make_venv(tmp_path / "venv", torch=torch_wheel(tmp_path_factory.mktemp("torch")))
    where = ("--no-index", "-f", tmp_path / "wheels", "--python", python)
    # Sigstore's production root (the default) refuses the test deployment's signature:
    # nothing is installed.
    refused = run_cli("install", "img2gray", *where, check=False)
    one_line_error(refused, "fails kernel-wheels check, so no installer saw it: [provenance] k build/",
                   "the signature does not verify", "nothing was installed", status=1)
    listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "img2gray" not in listed
    run_cli("install", "img2gray", *where, "--trusted-root", root, "--require-signature")
    listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "img2gray" in listed


def test_serve_converts_under_the_policy(hub: HostileHub, tmp_path: Path) -> None:
    """serve's on-demand conversion verifies as to-wheel does: the signed wheel is served
    (its record inside) under the deployment's root; under Sigstore's production root
    (the default) the same wheel is refused, never served."""
    hub.reset(signed_repo(tmp_path))
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    for name, options, served in (("trusted", ("--trusted-root", str(tmp_path / "root.json")), True),
                                  ("production", (), False)):
        with serve(REPO, tmp_path / name / "cache", env, "--retries", "0", *options) as server:
            status, _, body = get(server.base + "simple/kernel/", accept=JSON_TYPE)
            assert status == 200, body
            url = urljoin(server.base + "simple/kernel/", json.loads(body)["files"][0]["url"])
            status, _, wheel = get(url)
            if served:
                assert status == 200
                (tmp_path / "served.whl").write_bytes(wheel)
                assert verified_record(tmp_path / "served.whl")["status"] == "signed"
            else:
                assert status >= 500 and b"the signature does not verify" in wheel, (status, wheel)


def test_hub_flag_recorded_once_per_commit_same_bytes_offline(hub: HostileHub, tmp_path: Path) -> None:
    """The wheel records the Hub's first answer for the commit (the same bytes run after
    run, online or offline); a policy is held to the answer of now."""
    hub.reset(signed_repo(tmp_path))
    assert hub_convert(hub, tmp_path).returncode == 0
    wheel = next((tmp_path / "out").glob("*.whl"))
    first = wheel.read_bytes()
    hub.override("overview:evil", Answer.json({"name": "evil", "fullname": "E", "avatarUrl": "",
                                               "trustedKernelPublisher": True}))
    now_trusted = hub_convert(hub, tmp_path, "--require-trusted-publisher", "--force")
    assert now_trusted.returncode == 0, now_trusted.stderr
    assert wheel.read_bytes() == first and verified_record(wheel)["trusted_publisher"] is False
    env = {"HF_HUB_OFFLINE": "1"}
    offline = run_cli("to-wheel", REPO, "1.0.0", "-o", tmp_path / "offline", "--trusted-root",
                      tmp_path / "root.json", env={"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"),
                                                   "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"),
                                                   "HF_TOKEN": "", **env})
    assert "☸" in offline.stderr
    assert (tmp_path / "offline" / wheel.name).read_bytes() == first


def test_mirror_converts_under_the_policy(hub: HostileHub, tmp_path: Path) -> None:
    """A release whose signature does not verify under the mirror's policy is a refused
    row, nothing of it lands in the destination; under the right root it is mirrored."""
    hub.reset(signed_repo(tmp_path))
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "",
           "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    refused = run_cli("mirror", REPO, "--to", tmp_path / "strict", "--json", "--retries", "0",
                      env=env, check=False)
    rows = json.loads(refused.stdout)["items"]
    assert [(r["status"], r["repo"]) for r in rows] == [("refused", REPO)], refused.stdout
    assert "the signature does not verify" in rows[0]["detail"]
    assert not list((tmp_path / "strict").rglob("*.whl"))
    mirrored = run_cli("mirror", REPO, "--to", tmp_path / "site", "--json", "--retries", "0",
                       "--trusted-root", tmp_path / "root.json", "--require-signature", env=env)
    assert [r["status"] for r in json.loads(mirrored.stdout)["items"]] == ["added"]
    (wheel,) = (tmp_path / "site").rglob("*.whl")
    assert verified_record(wheel)["status"] == "signed"
