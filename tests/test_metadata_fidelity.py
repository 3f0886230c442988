"""metadata.json exactly as kernels-data reads it, what the wheel carries of it, and the
trust root (issue #38, points 5-7; docs/wheel-contract.md, docs/provenance.md).

The judge is the real one: the `kernels` library's own reader (kernels-data, compiled into
`kernels._rust`), given the same bytes as kernel-wheels. The starting point is
kernels-data's own test file of a real Hub kernel's metadata.json (tests/data/README.md
says where each file comes from). Signatures are real: the test deployment of
scripts/make_test_signature.py, and one bundle signed on Sigstore's production instance.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from packaging.metadata import Metadata
from packaging.version import Version
from test_check import rewrite
from test_provenance import make_signature

from kernel_wheels.errors import MetadataError
from kernel_wheels.kernel.digest import digest_folder
from kernel_wheels.kernel.metadata import read_kernel_metadata
from support.helpers import ROOT, UV, make_venv, one_line_error, read_member, run_cli
from support.servers_index import pip_env

DATA = Path(__file__).parent / "data"
LEGACY = json.loads((DATA / "kernels-data" / "legacy-sha-provenance.json").read_text())
BUILDER_SHA = "d0610aa58db33b142c86b59598a2a1c730f52996"
KERNEL_SHA = "d45addadb0c380f3d7cc2813310b3bcd75f8aa9a"
VARIANT = "torch-cpu"
Change = Callable[[dict[str, Any]], None]


def kernels_reads(raw: dict[str, Any]) -> bool:
    """Whether the `kernels` library's reader (kernels-data) accepts these bytes."""
    from kernels._rust import Metadata as KernelsMetadata

    try:
        KernelsMetadata.from_bytes(json.dumps(raw).encode())
    except ValueError:
        return False
    return True


def put(path: str, value: object) -> Change:
    """A change to metadata.json at ``path`` (``provenance.kernel.sha``); ``...`` removes it."""
    def change(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            raw = raw[key]
        if value is ...:
            del raw[last]
        else:
            raw[last] = value
    return change


def current(raw: dict[str, Any]) -> None:
    """The format kernel-builder writes today: ``commit``, not the legacy ``sha``."""
    for part in ("kernel-builder", "kernel"):
        raw["provenance"][part]["commit"] = raw["provenance"][part].pop("sha")


# (case, change, the key the refusal names; None: both readers accept it)
CASES: list[tuple[str, Change, str | None]] = [
    ("kernels-data's legacy file as it is", lambda raw: None, None),
    ("the current provenance spelling", current, None),
    ("provenance a number", put("provenance", 42), "'provenance'"),
    ("provenance empty", put("provenance", {}), "'provenance.kernel-builder'"),
    ("provenance null", put("provenance", None), None),
    ("kernel commit without dirty", put("provenance.kernel.dirty", ...), "'provenance.kernel'"),
    ("kernel dirty without commit", put("provenance.kernel.sha", ...), "'provenance.kernel'"),
    ("kernel-builder commit without dirty", put("provenance.kernel-builder.dirty", ...),
     "'provenance.kernel-builder'"),
    ("kernel-builder dirty without commit", put("provenance.kernel-builder.sha", ...),
     "'provenance.kernel-builder'"),
    ("kernel-builder without version", put("provenance.kernel-builder.version", ...),
     "'provenance.kernel-builder.version'"),
    ("kernel provenance a string", put("provenance.kernel", "nonsense"), "'provenance.kernel'"),
    ("kernel provenance null", put("provenance.kernel", None), None),
    ("a commit that is not a git object id", put("provenance.kernel.sha", "not-an-oid"),
     "'provenance.kernel.sha'"),
    ("an abbreviated commit", put("provenance.kernel.sha", KERNEL_SHA[:7]), "'provenance.kernel.sha'"),
    ("a SHA-256 commit in capitals", put("provenance.kernel.sha", "A" * 64), None),
    ("a builder commit that is not an oid", put("provenance.kernel-builder.sha", "main"),
     "'provenance.kernel-builder.sha'"),
    ("both commit and sha", put("provenance.kernel.commit", KERNEL_SHA), "'provenance.kernel'"),
    ("dirty a string", put("provenance.kernel.dirty", "no"), "'provenance.kernel.dirty'"),
    ("an uppercase name", put("name", "Einops"), "'name'"),
    ("a name with '_'", put("name", "my_kernel"), "'name'"),
    ("a one-letter name", put("name", "e"), "'name'"),
    ("a name ending in '-'", put("name", "einops-"), "'name'"),
    ("no version", put("version", ...), "'version'"),
    ("a negative version", put("version", -1), "'version'"),
    ("a version string", put("version", "1"), "'version'"),
    ("no id", put("id", ...), "'id'"),
    ("no license", put("license", ...), "'license'"),
    ("licence 'other'", put("license", "other"), None),
    ("no python-depends", put("python-depends", ...), "'python-depends'"),
    ("no backend", put("backend", ...), "'backend'"),
    ("an unknown backend", put("backend", {"type": "universal"}), "'backend.type'"),
    ("a TPU backend", put("backend", {"type": "tpu"}), None),
    ("archs null", put("backend", {"type": "cuda", "archs": None}), None),
    ("a sha512 digest", put("digest.algorithm", "sha512"), None),
    ("an md5 digest", put("digest.algorithm", "md5"), "'digest.algorithm'"),
    ("a digest without files", put("digest.files", ...), "'digest.files'"),
    ("no digest", put("digest", None), None),
    ("upstream over ftp", put("upstream", "ftp://example.com/x.git"), "'upstream'"),
    ("upstream not a URL", put("upstream", "einops"), "'upstream'"),
    ("upstream host:path", put("upstream", "github.com:org/repo"), "'upstream'"),
    ("upstream in scp form", put("upstream", "git@github.com:arogozhnikov/einops.git"), None),
    ("source a file URL", put("source", "file:///home/kernel"), "'source'"),
    ("source git+https", put("source", "git+https://github.com/huggingface/kernels-community"), None),
    ("a kernel pinned to a revision", put("kernel-depends", [{"repo-id": "acme/act", "revision": "v2"}]),
     None),
    ("a kernel by major version", put("kernel-depends", [{"repo-id": "acme/act", "version": 1}]), None),
    ("version and revision", put("kernel-depends", [{"repo-id": "a/b", "version": 1, "revision": "x"}]),
     "'kernel-depends'"),
    ("neither version nor revision", put("kernel-depends", [{"repo-id": "a/b"}]), "'kernel-depends'"),
    ("an unknown key in a dependency", put("kernel-depends", [{"repo-id": "a/b", "version": 1, "x": 1}]),
     "'kernel-depends'"),
    ("kernel-depends null", put("kernel-depends", None), "'kernel-depends'"),
    ("a key from a newer writer", put("future-field", {"nested": [1]}), None),
]


def write_variant(folder: Path, raw: dict[str, Any]) -> Path:
    variant = folder / VARIANT
    variant.mkdir(parents=True, exist_ok=True)
    (variant / "metadata.json").write_text(json.dumps(raw))
    return variant / "metadata.json"


@pytest.mark.parametrize("case, change, key", CASES, ids=[case for case, _, _ in CASES])
def test_the_reader_judges_as_kernels_data(tmp_path: Path, case: str, change: Change,
                                           key: str | None) -> None:
    """Every verdict equals kernels-data's, on the same bytes; a refusal is one line naming
    the file and the key. (Before: the legacy `sha` was read as no commit, and `provenance:
    42`, an uppercase name, a missing version, a half provenance and a commit that is no
    object id were all converted.)"""
    raw = copy.deepcopy(LEGACY)
    change(raw)
    assert kernels_reads(raw) is (key is None), "the case no longer says what kernels-data does"
    path = write_variant(tmp_path, raw)
    if key is None:
        assert read_kernel_metadata(path).name == raw["name"]
        return
    with pytest.raises(MetadataError) as refused:
        read_kernel_metadata(path)
    message = refused.value.message
    assert message.startswith(f"{VARIANT}/metadata.json") and key in message and "\n" not in message


def test_legacy_sha_is_the_commit_and_both_are_recorded() -> None:
    """kernels-data's alias, read into the same values kernels reads."""
    from kernels._rust import Metadata as KernelsMetadata

    from kernel_wheels.provenance import BuildFacts

    for raw in (LEGACY, {**LEGACY, "provenance": copy.deepcopy(LEGACY["provenance"])}):
        theirs = KernelsMetadata.from_bytes(json.dumps(raw).encode()).provenance
        facts = BuildFacts.from_metadata(raw)
        assert (facts.kernel_commit, facts.builder_commit, facts.dirty) == \
            (theirs.kernel.commit, theirs.kernel_builder.git.commit, theirs.dirty) == \
            (KERNEL_SHA, BUILDER_SHA, False)
    upper = copy.deepcopy(LEGACY)
    upper["provenance"]["kernel"]["sha"] = KERNEL_SHA.upper()
    assert BuildFacts.from_metadata(upper).kernel_commit == KERNEL_SHA  # lowercased, as kernels does


@pytest.mark.parametrize("case, raw, ours, theirs", [
    # kernel-builder before April 2026 wrote no name, id or licence (kernels < 0.14 loads
    # such builds; the Hub keeps them): converted with a warning, not refused.
    ("the format before kernels 0.14", {"python-depends": [], "version": 1}, "warn", False),
    ("the format before kernels 0.14, no version", {"python-depends": ["einops"]}, "warn", False),
    # A dependency must be a Hub repository (org/name): its wheels' name and LOCAL_KERNELS
    # need one, though kernels-data takes any string.
    ("a dependency that is not org/name", {**LEGACY, "kernel-depends": [{"repo-id": "act", "version": 1}]},
     "refuse", True),
    ("an empty revision", {**LEGACY, "kernel-depends": [{"repo-id": "a/b", "revision": ""}]}, "refuse", True),
    # A METADATA header cannot carry a line break (kernels-data's URL parser drops it).
    ("a line break in a URL", {**LEGACY, "upstream": "https://github.com/a/\nb"}, "refuse", True),
])
def test_where_kernel_wheels_parts_from_kernels_data(tmp_path: Path, case: str, raw: dict[str, Any],
                                                     ours: str, theirs: bool) -> None:
    """The deliberate differences, each with its reason (docs/wheel-contract.md)."""
    assert kernels_reads(raw) is theirs
    path = write_variant(tmp_path, raw)
    if ours == "refuse":
        with pytest.raises(MetadataError):
            read_kernel_metadata(path)
        return
    meta = read_kernel_metadata(path)
    assert meta.warnings == (f"{VARIANT}/metadata.json is in the format from before kernels 0.14 "
                             "(no 'name'): converted, but kernels 0.14 and later do not load this build",)


# -- to-wheel: what reaches the wheel -------------------------------------------------------------


def noarch_kernel(root: Path, meta: dict[str, Any], *, variants: tuple[str, ...] = (VARIANT,),
                  algorithm: str = "sha256") -> Path:
    """A pure-Python kernel (folder source) whose variants carry ``meta`` and a digest."""
    for name in variants:
        variant = root / "build" / name
        (variant / "act").mkdir(parents=True)
        (variant / "__init__.py").write_text("VALUE = 1\n")
        (variant / "act" / "__init__.py").write_text("from .. import *\n")
        backend = {"type": name.removeprefix("torch-")}
        digest = {"algorithm": algorithm, "files": digest_folder(variant, algorithm)}
        (variant / "metadata.json").write_text(json.dumps({"backend": backend, **meta, "digest": digest}))
    return root


BASE = {"name": "act", "id": "_act_noarch", "version": 1, "license": "apache-2.0", "python-depends": []}


def test_provenance_the_kernels_library_refuses_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    for number, (provenance, key) in enumerate([
            (42, "'provenance'"),
            ({"kernel-builder": {"version": "0.17.0", "sha": BUILDER_SHA}}, "'provenance.kernel-builder'"),
            ({"kernel-builder": {"version": "0.17.0"}, "kernel": {"commit": "not-an-oid", "dirty": True}},
             "'provenance.kernel.commit'")]):
        source = noarch_kernel(tmp_path / f"k{number}", {**BASE, "provenance": provenance})
        proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / f"out{number}", check=False)
        one_line_error(proc, "metadata.json", key, status=1)
        assert not (tmp_path / f"out{number}").exists() or not list((tmp_path / f"out{number}").iterdir())


@pytest.mark.parametrize("change, key", [({"name": "Act"}, "'name'"), ({"version": None}, "'version'")])
def test_names_and_versions_kernels_refuses_are_refused(tmp_path: Path, change: dict[str, Any],
                                                        key: str) -> None:
    meta = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    proc = run_cli("to-wheel", noarch_kernel(tmp_path / "k", meta), "1.0.0", "-o", tmp_path / "out",
                   check=False)
    one_line_error(proc, f"{VARIANT}/metadata.json: {key}", status=1)


def test_legacy_sha_provenance_reaches_the_wheel(tmp_path: Path) -> None:
    """Before: both commits were recorded as null."""
    source = noarch_kernel(tmp_path / "k", {**BASE, "provenance": LEGACY["provenance"]})
    run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out")
    build = json.loads(read_member(next((tmp_path / "out").glob("*.whl")), "kernel_wheels.verified.json"))["build"]
    assert build == {"kernel_commit": KERNEL_SHA, "builder_commit": BUILDER_SHA,
                     "builder_version": "0.17.0-dev0", "dirty": False}


def test_the_format_before_kernels_0_14_converts_with_one_warning_per_file(tmp_path: Path) -> None:
    source = noarch_kernel(tmp_path / "k", {"python-depends": []}, variants=("torch-cpu", "torch-cuda"))
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out")
    warnings = sorted(line for line in proc.stderr.splitlines() if line.startswith("warning:"))
    assert warnings == [f"warning: {name}/metadata.json is in the format from before kernels 0.14 (no "
                        "'name'): converted, but kernels 0.14 and later do not load this build"
                        for name in ("torch-cpu", "torch-cuda")]
    assert len(list((tmp_path / "out").glob("*.whl"))) == 2


@pytest.mark.parametrize("licence, field", [("other", "License: other"), ("llama2", "License: llama2"),
                                            ("apache-2.0", "License-Expression: Apache-2.0"),
                                            ("MIT OR Apache-2.0", "License-Expression: MIT OR Apache-2.0")])
def test_licence_and_urls_reach_core_metadata(tmp_path: Path, licence: str, field: str) -> None:
    """A licence that is not SPDX is `License`, an SPDX one `License-Expression`; upstream
    and source are Project-URLs. Before: 'other' gave no licence line, no URL came through."""
    meta = {**BASE, "license": licence, "upstream": "git@github.com:acme/act.git",
            "source": "https://github.com/acme/act-kernel"}
    run_cli("to-wheel", noarch_kernel(tmp_path / "k", meta), "1.0.0", "-o", tmp_path / "out")
    text = read_member(next((tmp_path / "out").glob("*.whl")), ".dist-info/METADATA")
    parsed = Metadata.from_email(text, validate=True)
    assert field in text.splitlines() and parsed.metadata_version == "2.4"
    assert ("License-Expression" in text) is not ("License:" in text)
    assert parsed.project_urls == {"Upstream": "ssh://git@github.com/acme/act.git",
                                   "Kernel source": "https://github.com/acme/act-kernel"}


def test_a_revision_pin_is_recorded_and_said_once(tmp_path: Path) -> None:
    """pip cannot pin a Hub revision: the Requires-Dist names the kernel, the record keeps
    the pin, and the run says so in one line (not one per variant). Before: the pin was
    dropped without a word."""
    depends = [{"repo-id": "acme/activation", "revision": "0123abcd"},
               {"repo-id": "acme/layer-norm", "version": 2}]
    source = noarch_kernel(tmp_path / "k", {**BASE, "kernel-depends": depends},
                           variants=("torch-cpu", "torch-cuda"))
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out")
    said = [line for line in proc.stderr.splitlines() if "Requires-Dist" in line]
    assert said == ["warning: kernel-depends pins acme/activation to revision '0123abcd', which a "
                    "Requires-Dist cannot express: the wheels require 'activation' of any version and "
                    "record the pin in their kernel_wheels.json (local-kernels checks it)"]
    for wheel in (tmp_path / "out").glob("*.whl"):
        requires = Metadata.from_email(read_member(wheel, ".dist-info/METADATA")).requires_dist or []
        assert [str(r) for r in requires][1:] == ["activation", "layer-norm<3,>=2"]
        record = json.loads(read_member(wheel, "kernel_wheels.json"))
        assert record["kernel_depends"] == [
            {"repo-id": "acme/activation", "revision": "0123abcd", "requirement": "activation"},
            {"repo-id": "acme/layer-norm", "version": 2, "requirement": "layer-norm>=2,<3"}]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_local_kernels_holds_installed_kernels_to_their_pins(tmp_path: Path) -> None:
    """LOCAL_KERNELS maps a repository to one folder for every revision: local-kernels
    names each pin the installed kernel is not known to meet (its commit, an abbreviation
    of it, its release tag). Before: pins were not read at all."""
    dep = noarch_kernel(tmp_path / "dep", {**BASE, "name": "dep", "id": "_dep_noarch"})
    git(tmp_path, "init", "-q", "-b", "main", str(dep))
    git(dep, "add", "-A")
    git(dep, "commit", "-qm", "v1.0.0")
    git(dep, "tag", "v1.0.0")
    commit = git(dep, "rev-parse", "HEAD")
    run_cli("to-wheel", dep, "1.0.0", "--repo-id", "acme/dep", "-o", tmp_path / "wheels")
    for name, revision in (("app-commit", commit[:12]), ("app-tag", "v1.0.0"), ("app-other", "f" * 40)):
        meta = {**BASE, "name": name, "id": f"_{name}", "kernel-depends": [{"repo-id": "acme/dep",
                                                                              "revision": revision}]}
        run_cli("to-wheel", noarch_kernel(tmp_path / name, meta), "1.0.0", "--repo-id", f"acme/{name}",
                "-o", tmp_path / "wheels")
    python = make_venv(tmp_path / "venv")
    subprocess.run([UV, "pip", "install", "-q", "--no-deps", "--python", str(python),
                    *map(str, (tmp_path / "wheels").glob("*.whl"))], check=True, capture_output=True,
                   env=pip_env())
    # Ids typed by hand (--repo-id) are mapped, and so held to pins, on opt-in only.
    assert run_cli("local-kernels", "--python", python).stdout.strip() == ""
    proc = run_cli("local-kernels", "--python", python, "--allow-hand-ids")
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: app-other pins acme/dep to revision '{'f' * 40}', but the installed dep "
                        f"1.0.0+cpu (commit {commit}, release v1.0.0) is not known to be it, and LOCAL_KERNELS "
                        "gives it to kernels for every revision"]
    assert sorted(entry.split("=")[0] for entry in proc.stdout.strip().split(":")) == \
        ["acme/app-commit", "acme/app-other", "acme/app-tag", "acme/dep"]
    listed = {k["distribution"]: k for k in json.loads(run_cli("local-kernels", "--python", python,
                                                               "--json").stdout)}
    assert listed["app-tag"]["kernel_depends_pinned"] == [{"repo_id": "acme/dep", "revision": "v1.0.0"}]


# -- sha512 digests ---------------------------------------------------------------------------


def test_a_sha512_digest_is_verified_both_ways(tmp_path: Path) -> None:
    """Before: 'digest algorithm sha512 is not checked', so a changed file passed."""
    source = noarch_kernel(tmp_path / "k", BASE, algorithm="sha512")
    run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out")
    (wheel,) = (tmp_path / "out").glob("*.whl")
    checked = run_cli("check", "-v", wheel)
    assert "pass: [digest] 2 files match metadata.json's digest" in checked.stdout
    tampered = rewrite(wheel, tmp_path / wheel.name, {f"act/{VARIANT}/__init__.py": b"VALUE = 2\n"},
                       update_record=True)
    proc = run_cli("check", tampered, check=False)
    assert proc.returncode == 1
    assert f"fail: [digest] act/{VARIANT}/__init__.py differs from its metadata.json digest" in proc.stdout


def test_a_signed_sha512_digest_converts_and_is_reverified(tmp_path: Path) -> None:
    """kernels-data signs either algorithm; before, a signed sha512 digest was refused."""
    from kernel_wheels.provenance import Policy, verify_variant_folder

    source = noarch_kernel(tmp_path / "k", BASE, algorithm="sha512")
    variant = source / "build" / VARIANT
    root = tmp_path / "root.json"
    make_signature(variant / "metadata.json", variant / "metadata.json.sigstore", root)
    found = verify_variant_folder(variant, "acme/act", Policy(trusted_root=root))
    assert found.signed and found.files_verified == 2
    run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", "--trusted-root", root,
            "--require-signature")
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert json.loads(read_member(wheel, "kernel_wheels.verified.json"))["files_verified"] == 2
    assert run_cli("verify", wheel, "--trusted-root", root).returncode == 0
    tampered = rewrite(wheel, tmp_path / wheel.name, {f"act/{VARIANT}/__init__.py": b"VALUE = 2\n"},
                       update_record=True)
    proc = run_cli("verify", tampered, "--trusted-root", root, check=False)
    assert proc.returncode == 1 and "__init__.py differs from its signed digest" in proc.stdout
    (variant / "__init__.py").write_text("VALUE = 3\n")
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out2", "--trusted-root", root, check=False)
    one_line_error(proc, "__init__.py differs from its signed digest", status=1)


# -- the trust root -----------------------------------------------------------------------------


def _keys(root: dict[str, Any]) -> set[tuple[str, str]]:
    """Every key and certificate a trusted root trusts, by kind."""
    found = {(kind, log["publicKey"]["rawBytes"]) for kind in ("tlogs", "ctlogs") for log in root.get(kind, [])}
    for kind in ("certificateAuthorities", "timestampAuthorities"):
        found |= {(kind, cert["rawBytes"]) for authority in root.get(kind, [])
                  for cert in authority["certChain"]["certificates"]}
    return found


def test_the_trust_root_is_no_older_than_the_one_kernels_fetches() -> None:
    """kernel-wheels' production root holds every log, CA and timestamp authority of the
    root Sigstore's TUF repository serves today (what `kernels` gets online), the Rekor v2
    log among them; the floor the code states is pyproject's, and the installed sigstore
    meets it. Before: `sigstore>=4.0`, whose root lacks the Rekor v2 log."""
    from kernel_wheels.provenance.policy import Policy
    from kernel_wheels.provenance.signature import REKOR_V2_LOG, SIGSTORE_FLOOR, _root_bytes, has_rekor_v2

    served = json.loads((DATA / "sigstore" / "production_trusted_root.json").read_text())
    ours_bytes, name = _root_bytes(Policy())
    assert name == "sigstore-production"
    assert _keys(served) <= _keys(json.loads(ours_bytes))
    assert [log["baseUrl"] for log in served["tlogs"] if log["logId"]["keyId"] == REKOR_V2_LOG[1]] == \
        [REKOR_V2_LOG[0]]
    assert has_rekor_v2(ours_bytes)
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"sigstore>={SIGSTORE_FLOOR}" in dependencies
    assert Version(importlib.metadata.version("sigstore")) >= Version(SIGSTORE_FLOOR)
    older = {**served, "tlogs": [log for log in served["tlogs"] if log["logId"]["keyId"] != REKOR_V2_LOG[1]]}
    assert not has_rekor_v2(json.dumps(older).encode())  # sigstore 4.0.0's root, in effect


BUNDLE_SIGNER = "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2"
OFFLINE = """
import json, sys
from pathlib import Path
from kernel_wheels.provenance.policy import Policy, parse_signer
from kernel_wheels.provenance.signature import SignatureRefused, verify_bundle
artifact, bundle = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]).read_bytes()
policies = {"signer": Policy(signers=(parse_signer(sys.argv[3]),)), "default": Policy()}
found = {}
for name, policy in policies.items():
    for label, data in (("artifact", artifact), ("changed", artifact + b"x")):
        try:
            signed = verify_bundle(data, bundle, policy)
            found[f"{name} {label}"] = [signed.identity, signed.issuer, signed.log_index, signed.trust_root]
        except SignatureRefused as exc:
            found[f"{name} {label}"] = str(exc)
print(json.dumps(found))
"""


def test_a_production_signed_bundle_verifies_offline() -> None:
    """A bundle signed on Sigstore's production instance by a GitHub Actions workflow,
    verified by kernel-wheels' own code against the production root with every network
    route closed (a proxy that refuses, no Hub, no TUF)."""
    assets = DATA / "sigstore"
    env = {**pip_env(), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": "", "no_proxy": "", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": f"{ROOT / 'src'}"}
    proc = subprocess.run([sys.executable, "-c", OFFLINE, str(assets / "bundle_v3_github.whl"),
                           str(assets / "bundle_v3_github.whl.sigstore"),
                           f"https://token.actions.githubusercontent.com={BUNDLE_SIGNER}"],
                          capture_output=True, text=True, env=env, check=True)
    assert json.loads(proc.stdout) == {
        "signer artifact": [BUNDLE_SIGNER, "https://token.actions.githubusercontent.com", 79605083,
                            "sigstore-production"],
        "signer changed": "the bundle does not sign this metadata.json (another artifact, or the file "
                          "was changed)",
        "default artifact": "signed by a signer the policy does not accept",
        "default changed": "signed by a signer the policy does not accept",  # sigstore asks it first
    }
    with zipfile.ZipFile(assets / "bundle_v3_github.whl") as wheel:  # the artifact is what it says
        assert "rfc8785-0.1.2.dist-info/METADATA" in wheel.namelist()


def test_the_stored_assets_are_unchanged() -> None:
    """tests/data/README.md's checksums: the files are the originals."""
    import hashlib

    readme = (DATA / "README.md").read_text()
    for path in [*(DATA / "sigstore").iterdir(), *(DATA / "kernels-data").iterdir()]:
        assert f"`{hashlib.sha256(path.read_bytes()).hexdigest()[:8]}…` {path.name}" in readme, path
