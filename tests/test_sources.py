"""Sources and versions: a real Hub-compatible server (olah) on 127.0.0.1 through
huggingface_hub, local git repositories and git URLs, the HF cache, offline mode,
and the errors users hit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from support.helpers import Olah, free_port, one_line_error, read_member, run_cli
from support.http_server import LoopbackServer

CPU = "torch213-cxx11-cpu-x86_64-linux"


def git_commit(repo: Path, ref: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", f"{ref}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def convert(source: str, *args: str, env: dict[str, str], out: Path) -> dict:  # type: ignore[type-arg]
    proc = run_cli("to-wheel", source, *args, "-o", out, "--json", env=env)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("repo_type", ["kernel", "model"])
@pytest.mark.parametrize("request_args, ref, version", [
    (["1.1.2"], "v1.1.2", "1.1.2"),
    (["v1.1.1"], "v1.1.1", "1.1.1"),
    ([">=1.1,<1.1.2"], "v1.1.1", "1.1.1"),
    ([">=1,<2"], "v1.1.2", "1.1.2"),
    (["1"], "v1", "1.1.2.post0.dev20260103000000"),  # a snapshot after release 1.1.2
])
def test_hub_versions(olah: Olah, kernel_repo: Path, hub_env: dict[str, str], tmp_path: Path,
                      repo_type: str, request_args: list[str], ref: str, version: str) -> None:
    result = convert("drbh/img2gray", *request_args, "--repo-type", repo_type, "--variant", "*cpu*",
                     env=hub_env, out=tmp_path / "out")
    commit = git_commit(kernel_repo, ref)
    assert result["revision"]["commit"] == commit and result["revision"]["ref"] == ref
    assert result["version"] == version
    wheel = Path(result["wheels"][0]["path"])
    assert wheel.name == f"img2gray-{version}+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    provenance = json.loads(read_member(wheel, "kernel_wheels.json"))
    url_type = "kernels/" if repo_type == "kernel" else ""
    # The Hub's own URL, not the endpoint (a mirror) it was read through: same bytes for all.
    assert provenance["commit"] == commit
    assert provenance["source"] == f"https://huggingface.co/{url_type}drbh/img2gray"
    assert provenance["release"] == (None if ref == "v1" else ref)
    assert "requested" not in provenance and "ref" not in provenance
    assert f"Project-URL: Source, https://huggingface.co/{url_type}drbh/img2gray/tree/{commit}" in \
        read_member(wheel, "METADATA")


def test_hub_by_commit_sha_prints_the_pin(olah: Olah, kernel_repo: Path, hub_env: dict[str, str],
                                          tmp_path: Path) -> None:
    commit = git_commit(kernel_repo, "v1.1.1")
    proc = run_cli("to-wheel", "drbh/img2gray", "--revision", commit[:10], "-o", tmp_path,
                   "--variant", "*cpu*", env=hub_env)
    assert f"at commit {commit}" in proc.stderr
    # the commit carries the release tag v1.1.1: asked for by SHA, it is still release 1.1.1
    assert "☸ img2gray-1.1.1+torch213cpucxx11-" in proc.stderr
    by_version = run_cli("to-wheel", "drbh/img2gray", "1.1.1", "-o", tmp_path / "v",
                         "--variant", "*cpu*", env=hub_env)
    assert "☸ img2gray-1.1.1+torch213cpucxx11-" in by_version.stderr
    wheel = next(tmp_path.glob("*.whl"))
    assert wheel.read_bytes() == (tmp_path / "v" / wheel.name).read_bytes()  # same bytes
    snapshot = git_commit(kernel_repo, "v1")
    proc = run_cli("to-wheel", "drbh/img2gray", "--revision", snapshot, "-o", tmp_path / "s",
                   "--variant", "*cpu*", env=hub_env)
    # no release tag: the major from metadata.json, placed after 1.1.2 by the commit's time
    assert "☸ img2gray-1.1.2.post0.dev20260103000000+torch213cpucxx11-" in proc.stderr
    named = run_cli("to-wheel", "drbh/img2gray", "1.1.1", "--revision", commit, "-o", tmp_path / "n",
                    "--variant", "*cpu*", env=hub_env)
    assert "☸ img2gray-1.1.1+torch213cpucxx11-" in named.stderr


def test_major_branch_later_commit_sorts_higher(olah: Olah, hub_env: dict[str, str], tmp_path: Path) -> None:
    from packaging.version import Version

    branch = convert("drbh/img2gray", "1", "--variant", "*cpu*", env=hub_env, out=tmp_path)["version"]
    first_commit = convert("drbh/img2gray", "--revision", "v1.1.1", "--variant", "*cpu*",
                           env=hub_env, out=tmp_path)["version"]
    assert Version(branch) > Version("1.1.2") and Version(first_commit) == Version("1.1.1")


def test_kernel_type_first_then_model(olah: Olah, hub_env: dict[str, str], tmp_path: Path) -> None:
    both = convert("drbh/img2gray", "1.1.2", "--variant", "*cpu*", env=hub_env, out=tmp_path / "a")
    assert "https://huggingface.co/kernels/drbh/img2gray/tree/" in \
        read_member(Path(both["wheels"][0]["path"]), "METADATA")
    model_only = convert("drbh/img2gray-model", "1.1.2", "--variant", "*cpu*", env=hub_env,
                         out=tmp_path / "b")
    metadata = read_member(Path(model_only["wheels"][0]["path"]), "METADATA")
    assert "https://huggingface.co/drbh/img2gray-model/tree/" in metadata


def _blob_bytes(hf_home: Path) -> int:
    return sum(p.stat().st_size for p in hf_home.rglob("blobs/*") if p.is_file())


def test_one_variant_downloads_only_that_variant_then_nothing(olah: Olah, build_output: Path,
                                                               hub_env: dict[str, str], tmp_path: Path) -> None:
    variant_bytes = sum(p.stat().st_size for p in (build_output / "build" / CPU).rglob("*") if p.is_file())
    before = olah.downloads()
    first = convert("drbh/img2gray", "1.1.2", "--variant", CPU, env=hub_env, out=tmp_path / "a")
    downloaded = _blob_bytes(Path(hub_env["HF_HOME"]))
    ratio = downloaded / variant_bytes
    print(f"downloaded {downloaded} bytes for a {variant_bytes}-byte variant: {ratio:.3f}x")
    assert ratio <= 1.05, ratio  # the other variant (the CUDA one, 3x larger) was not fetched
    served = olah.downloads() - before
    files = sum(p.is_file() for p in (build_output / "build" / CPU).rglob("*"))
    assert served == files + 1  # the variant's files and README.md
    again = convert("drbh/img2gray", "1.1.2", "--variant", CPU, env=hub_env, out=tmp_path / "b")
    assert olah.downloads() - before == served  # the second run downloaded nothing
    assert _blob_bytes(Path(hub_env["HF_HOME"])) == downloaded
    assert first["wheels"][0]["sha256"] == again["wheels"][0]["sha256"]


def test_offline_from_cache(olah: Olah, hub_env: dict[str, str], tmp_path: Path) -> None:
    online = convert("drbh/img2gray", "1.1.2", "--variant", CPU, env=hub_env, out=tmp_path / "a")
    branch = convert("drbh/img2gray", "1", "--variant", CPU, env=hub_env, out=tmp_path / "c")
    offline_env = {**hub_env, "HF_HUB_OFFLINE": "1"}  # same endpoint: it is in Project-URL
    before = olah.requests()
    offline = convert("drbh/img2gray", "1.1.2", "--variant", CPU, env=offline_env, out=tmp_path / "b")
    assert offline["wheels"][0]["sha256"] == online["wheels"][0]["sha256"]  # same bytes
    ranged = convert("drbh/img2gray", ">=1.1,<2", "--variant", CPU, env=offline_env, out=tmp_path / "d")
    assert ranged["revision"]["ref"] == "v1.1.2"
    major = convert("drbh/img2gray", "1", "--variant", CPU, env=offline_env, out=tmp_path / "e")
    assert major["version"] == branch["version"]
    assert olah.requests() == before  # not one request reached the server
    missing = run_cli("to-wheel", "drbh/img2gray", "1.1.1", "-o", tmp_path / "f", env=offline_env, check=False)
    assert missing.returncode == 1
    assert "HF_HUB_OFFLINE=1" in missing.stderr and "Traceback" not in missing.stderr


def test_variants_command(olah: Olah, hub_env: dict[str, str], kernel_repo: Path) -> None:
    proc = run_cli("variants", "drbh/img2gray", "--revision", "v1.1.2", "--json", env=hub_env)
    listed = json.loads(proc.stdout)
    assert listed["revision"]["commit"] == git_commit(kernel_repo, "v1.1.2")
    cuda = next(v for v in listed["variants"] if v["backend"] == "cuda")
    assert cuda == {"name": "torch214-cxx11-cu130-x86_64-linux", "framework": "torch",
                    "framework_version": "2.14", "cxx_abi": "cxx11", "backend": "cuda",
                    "backend_tag": "cu130", "backend_version": "13.0", "cpu_arch": "x86_64",
                    "os": "linux", "noarch": False}
    table = run_cli("variants", str(kernel_repo), "--revision", "v1").stdout
    assert table.splitlines()[0].split() == ["variant", "framework", "version", "backend", "cxx", "arch", "os"]
    rows = [line.split() for line in table.splitlines()[1:]]
    assert ["torch213-cxx11-cpu-x86_64-linux", "torch", "2.13", "cpu", "cxx11", "x86_64", "linux"] in rows
    assert ["torch214-cxx11-cu130-x86_64-linux", "torch", "2.14", "cuda", "13.0", "cxx11", "x86_64", "linux"] in rows


def test_hub_errors(olah: Olah, hub_env: dict[str, str], tmp_path: Path) -> None:
    def error(*args: str, env: dict[str, str] = hub_env) -> str:
        proc = run_cli("to-wheel", *args, "-o", tmp_path, env=env, check=False)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        return proc.stderr.strip().splitlines()[-1]

    assert error("drbh/nope", "1.0.0") == (
        f"kernel-wheels: error: repository drbh/nope not found on {olah.endpoint} (as kernel or model "
        "repo); if it is private or gated, set HF_TOKEN")
    assert error("drbh/img2gray", "3.0.0") == (
        "kernel-wheels: error: version 3.0.0 not found; versions that exist: 1.1.1, 1.1.2, 1 (branch v1)")
    assert error("drbh/img2gray", "2").startswith(
        "kernel-wheels: error: major version 2 not found (no branch v2 in drbh/img2gray); versions that exist: 1.1.1")
    assert error("drbh/img2gray", "--revision", "no-such-branch").startswith(
        "kernel-wheels: error: revision 'no-such-branch' not found in drbh/img2gray; versions that exist:")
    assert error("drbh/no-build", "1.0.0") == (
        "kernel-wheels: error: drbh/no-build has no build/ folder at "
        + subprocess.run(["git", "-C", str(olah.root / "mirror/models/drbh/no-build"), "rev-parse", "HEAD"],
                         capture_output=True, text=True).stdout.strip())
    assert error("drbh/img2gray", "1.1.2", "--backend", "rocm") == (
        "kernel-wheels: error: the filters select no variant in drbh/img2gray; variants that exist: "
        "torch213-cxx11-cpu-x86_64-linux, torch214-cxx11-cu130-x86_64-linux")
    assert list(tmp_path.glob("*.whl")) == []


def test_hub_unreachable_after_retries(hub_env: dict[str, str], tmp_path: Path) -> None:
    env = {**hub_env, "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    proc = run_cli("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path, env=env, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    # each retry is announced, then one error line
    assert [line.split(";")[0] for line in lines[:-1]] == ["warning: listing refs: [Errno 111] Connection refused"] * 3
    assert lines[-1].startswith(f"kernel-wheels: error: listing refs: no usable answer from {env['HF_ENDPOINT']} "
                                "after 4 tries ([Errno 111] Connection refused)")
    # a bounded schedule, announced: retries 1, 2 and 3 of 3, then the end
    assert [line.rsplit(" ", 1)[-1] for line in lines[:-1]] == ["(1/3)", "(2/3)", "(3/3)"], lines


class HubErrorStandIn(BaseHTTPRequestHandler):
    """A stand-in for the Hub's answers that olah cannot give: gated repositories and
    rejected tokens (status codes and X-Error-Code headers as the Hub sends them)."""

    def do_GET(self) -> None:  # noqa: N802
        if "gated" in self.path:
            self.send_response(403)
            self.send_header("X-Error-Code", "GatedRepo")
            self.send_header("X-Error-Message", "Access to model acme/gated is restricted.")
        else:
            self.send_response(401)
            self.send_header("X-Error-Message", "Invalid credentials in Authorization header")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "denied"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def error_server() -> Iterator[str]:
    with LoopbackServer(HubErrorStandIn) as server:
        yield server.endpoint


def test_authentication_errors_mention_hf_token_never_print_it(error_server: str, hub_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    secret = "hf_kwTestSecretValue1234567890"
    env = {**hub_env, "HF_ENDPOINT": error_server, "HF_TOKEN": secret}
    denied = run_cli("to-wheel", "acme/private", "1.0.0", "-o", tmp_path, env=env, check=False)
    assert denied.returncode == 1
    assert "the token in HF_TOKEN (not shown) lacks access" in denied.stderr
    gated = run_cli("to-wheel", "acme/gated", "1.0.0", "-o", tmp_path, env=env, check=False)
    assert gated.returncode == 1
    assert "acme/gated is gated: accept its terms on the Hub, then set HF_TOKEN" in gated.stderr
    no_token = run_cli("to-wheel", "acme/private", "1.0.0", "-o", tmp_path,
                       env={**env, "HF_TOKEN": ""}, check=False)
    assert "needs authentication (HTTP 401): set HF_TOKEN" in no_token.stderr
    for proc in (denied, gated, no_token):
        assert secret not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


# -- the repository-id rule ---------------------------------------------------------------
@pytest.mark.parametrize("repo_id", ["org/a..b", "org/_name", "org/.name", "org/name/more", "org/"])
def test_every_command_takes_a_repository_id_by_one_rule(repo_id: str, tmp_path: Path) -> None:
    """to-wheel's SOURCE, serve's --kernels, mirror's REPO and a kernels.lock's repo_id are
    one rule (kernel.repo_id): what one refuses, each refuses with its own line, before
    any Hub is asked (the endpoint here answers nothing); an id it takes goes to the Hub."""
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HOME": str(tmp_path / "hf"),
           "KERNEL_WHEELS_CACHE": str(tmp_path / "kw")}
    one_line_error(run_cli("to-wheel", repo_id, "1.0.0", "-o", tmp_path / "out", cwd=tmp_path, env=env,
                           check=False),
                   f"'{repo_id}' is not an existing folder, a git URL or a Hub repository id", status=2)
    one_line_error(run_cli("serve", "--kernels", repo_id, env=env, check=False),
                   f"'{repo_id}' is not a Hub repository id (org/name)", status=2)
    one_line_error(run_cli("mirror", repo_id, "--to", tmp_path / "site", env=env, check=False),
                   f"a repository to mirror: '{repo_id}' is not a repository id (org/name)", status=1)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": repo_id, "sha": "a" * 40, "variants": {}}]))
    one_line_error(run_cli("to-wheel", "--lock", lock, "-o", tmp_path / "out", env=env, check=False),
                   "is not a Hub repository id (org/name)", status=1)
    assert not (tmp_path / "out").exists() and not (tmp_path / "site").exists()
    taken = run_cli("to-wheel", "Org-1/na.me_x-2", "1.0.0", "-o", tmp_path / "out", cwd=tmp_path,
                    env={**env, "HF_HUB_OFFLINE": "1"}, check=False)
    one_line_error(taken, "HF_HUB_OFFLINE=1 and Org-1/na.me_x-2 is not in the cache", status=1)


# -- git sources ----------------------------------------------------------------------
@pytest.mark.parametrize("as_url", [False, True])
def test_git_repo_versions(kernel_repo: Path, tmp_path: Path, as_url: bool) -> None:
    source = f"file://{kernel_repo}" if as_url else str(kernel_repo)
    env = {"KERNEL_WHEELS_CACHE": str(tmp_path / "cache")}
    for args, ref in ((["1.1.2"], "v1.1.2"), ([">=1.0,<1.1.2"], "v1.1.1"), (["1"], "v1"),
                      (["--revision", git_commit(kernel_repo, "v1.1.1")], None)):
        result = json.loads(run_cli("to-wheel", source, *args, "-o", tmp_path / "out", "--json",
                                    "--variant", "*cpu*", env=env).stdout)
        assert result["revision"]["commit"] == git_commit(kernel_repo, ref or "v1.1.1")
    if as_url:
        assert any((tmp_path / "cache" / "git").iterdir())  # a bare mirror, reused next time


def test_git_url_not_found(tmp_path: Path) -> None:
    proc = run_cli("to-wheel", f"file://{tmp_path}/missing.git", "1.0", check=False,
                   env={"KERNEL_WHEELS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"kernel-wheels: error: git repository file://{tmp_path}/missing.git not found")


def test_lfs_pointer_is_refused(kernel_repo: Path, tmp_path: Path) -> None:
    repo = tmp_path / "img2gray"
    shutil.copytree(kernel_repo, repo)
    so = next((repo / "build" / CPU).glob("*.so"))
    so.write_text("version https://git-lfs.github.com/spec/v1\n"
                  "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
                  "size 51234\n")
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit",
                    "-qam", "LFS pointer"], check=True)
    subprocess.run(["git", "-C", str(repo), "tag", "v1.1.3"], check=True)
    proc = run_cli("to-wheel", repo, "1.1.3", "-o", tmp_path / "out", "--variant", "*cpu*", check=False)
    assert proc.returncode == 1
    assert f"{CPU}/{so.name} is a git-LFS pointer, not the file itself" in proc.stderr
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_wheel_from_hub_installs_like_from_git(olah: Olah, kernel_repo: Path, hub_env: dict[str, str],
                                              tmp_path: Path) -> None:
    """The source does not change the wheel's package content."""
    hub = convert("drbh/img2gray", "1.1.2", "--variant", CPU, env=hub_env, out=tmp_path / "hub")
    git = json.loads(run_cli("to-wheel", kernel_repo, "1.1.2", "--variant", CPU, "-o", tmp_path / "git",
                             "--json").stdout)
    with zipfile.ZipFile(hub["wheels"][0]["path"]) as a, zipfile.ZipFile(git["wheels"][0]["path"]) as b:
        package = [n for n in a.namelist() if n.startswith("img2gray/")]
        assert package == [n for n in b.namelist() if n.startswith("img2gray/")]
        assert all(a.read(n) == b.read(n) for n in package)
    assert os.path.basename(hub["wheels"][0]["path"]) == os.path.basename(git["wheels"][0]["path"])
