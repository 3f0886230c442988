"""Working with the `kernels` library (issue #19): convert what a project locked (checked
against the lock before anything is written), then let `kernels.get_kernel` load the
installed wheels with the Hub gone, through its own LOCAL_KERNELS mechanism and digest
verification; kernel-to-kernel dependencies; `kernel-wheels versions`.

A Hub of our own (olah, offline mode, on 127.0.0.1) serves three kernel repositories: the
sample img2gray kernel (built for real), and two pure-Python kernels where one declares the
other in its metadata.json's `kernel-depends`. Lock hashes are computed here from the git
repositories with `git ls-tree`, independently of kernel-wheels.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.metadata import Metadata

from support.helpers import (
    UV,
    Olah,
    make_kernels_venv,
    make_venv,
    olah_server,
    one_line_error,
    read_member,
    run_cli,
    torch_wheel,
)
from support.servers_index import run_op

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
#: The `kernels` of the dev dependencies: the one whose lock format and loader are tested.
KERNELS_VERSION = importlib.metadata.version("kernels")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _noarch_kernel(repo: Path, name: str, depends: list[dict[str, object]], body: str) -> None:
    """A pure-Python kernel repository (variant torch-cpu) with a digested metadata.json,
    release tag v1.0.0 and major branch v1."""
    variant = repo / "build" / "torch-cpu"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text(body)
    files = {p.name: base64.b64encode(hashlib.sha256(p.read_bytes()).digest()).decode()
             for p in variant.iterdir()}
    module = name.replace("-", "_")
    meta = {"name": name, "id": f"_{module}_noarch", "version": 1, "license": "apache-2.0",
            "python-depends": [], "kernel-depends": depends, "backend": {"type": "cpu"},
            "digest": {"algorithm": "sha256", "files": files}}
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2))
    (repo / "README.md").write_text(f"# {name}\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "v1.0.0")
    git(repo, "tag", "-a", "v1.0.0", "-m", "v1.0.0")
    git(repo, "branch", "v1")


@dataclass(frozen=True)
class Hub:
    olah: Olah
    mirror: Path

    def repo(self, repo_id: str) -> Path:
        return self.mirror / "kernels" / repo_id

    def commit(self, repo_id: str, ref: str) -> str:
        return git(self.repo(repo_id), "rev-parse", f"{ref}^{{commit}}")

    def listing(self, repo_id: str, commit: str, variant: str) -> dict[str, str]:
        """{path in the variant: git blob id}, as `git ls-tree` says (no LFS here)."""
        out = git(self.repo(repo_id), "ls-tree", "-r", commit, f"build/{variant}")
        files = {}
        for line in out.splitlines():
            meta, path = line.split("\t", 1)
            files[path.removeprefix(f"build/{variant}/")] = meta.split()[2]
        return files

    def env(self, tmp: Path) -> dict[str, str]:
        return {"HF_ENDPOINT": self.olah.endpoint, "HF_HOME": str(tmp / "hf"),
                "KERNEL_WHEELS_CACHE": str(tmp / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def lock_hash(files: dict[str, str]) -> str:
    """kernels 0.x's git_lfs_concat, written out here from its definition."""
    digest = hashlib.sha256()
    for path, blob in sorted((p.encode("utf-8"), b) for p, b in files.items()):
        digest.update(path)
        digest.update(bytes.fromhex(blob))
    return f"sha256-{digest.hexdigest()}"


def blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@pytest.fixture(scope="module")
def hub(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("ecosystem-hub")
    mirror = root / "mirror"
    shutil.copytree(kernel_repo, mirror / "kernels" / "drbh" / "img2gray")
    _noarch_kernel(mirror / "kernels" / "drbh" / "gray-helper", "gray-helper", [],
                   "def scale(x):\n    return x * 2\n")
    _noarch_kernel(mirror / "kernels" / "drbh" / "gray-app", "gray-app",
                   [{"repo-id": "drbh/gray-helper", "version": 1}],
                   "ANSWER = 42\n")
    with olah_server(root, mirror, "kernels/drbh/img2gray") as olah:
        yield Hub(olah, mirror)


def _project(folder: Path, hub: Hub, kernels: dict[str, int], *, hashes: bool = True,
             changed: dict[str, dict[str, str | None]] | None = None) -> Path:
    """pyproject.toml + kernels.lock (kernels 0.x format with variant hashes, or 0.17's
    without); ``changed``: per repo, per variant folder path, a blob id to put in the
    hashed listing instead (None: leave the file out) -- a lock that disagrees."""
    folder.mkdir(parents=True, exist_ok=True)
    deps = "".join(f'"{repo}" = {major}\n' for repo, major in kernels.items())
    (folder / "pyproject.toml").write_text(f'[project]\nname = "app"\nversion = "0"\n\n'
                                           f"[tool.kernels.dependencies]\n{deps}")
    entries: list[object] = []
    for repo in kernels:
        tag = "v1.1.2" if repo == "drbh/img2gray" else "v1.0.0"
        commit = hub.commit(repo, tag)
        if not hashes:
            entries.append((repo, kernels[repo], commit))
            continue
        variants = {}
        for variant in git(hub.repo(repo), "ls-tree", "--name-only", f"{commit}:build").split():
            files = hub.listing(repo, commit, variant)
            for path, blob in (changed or {}).get(repo, {}).items():
                if path.startswith(variant + "/"):
                    name = path.split("/", 1)[1]
                    if blob is None:
                        files.pop(name)
                    else:
                        files[name] = blob
            variants[variant] = {"hash": lock_hash(files), "hash_type": "git_lfs_concat"}
        entries.append({"repo_id": repo, "sha": commit, "variants": variants})
    if not hashes:  # the kernels 0.17 format, written by the kernels library itself
        from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

        locks = KernelLocks({KernelDependency(repo, KernelVersion.Version(major)): KernelLock(commit)
                             for repo, major, commit in entries})
        (folder / "kernels.lock").write_text(locks.to_json())
        return folder
    (folder / "kernels.lock").write_text(json.dumps(entries, indent=2))
    return folder


# -- versions ------------------------------------------------------------------------------
def test_versions_lists_releases_and_major_branches(hub: Hub, tmp_path: Path) -> None:
    proc = run_cli("versions", "drbh/img2gray", "--json", env=hub.env(tmp_path))
    listed = json.loads(proc.stdout)["versions"]
    assert [(v["kind"], v["version"], v["ref"]) for v in listed] == [
        ("release", "1.1.2", "v1.1.2"), ("release", "1.1.1", "v1.1.1"), ("major", "1", "v1")]
    for row in listed:
        assert row["commit"] == hub.commit("drbh/img2gray", row["ref"]) and row["variants"] == 2
    text = run_cli("versions", "drbh/img2gray", env=hub.env(tmp_path)).stdout.splitlines()
    assert text[0].split() == ["version", "kind", "ref", "commit", "builds"]
    assert text[1].split()[:3] == ["1.1.2", "release", "v1.1.2"] and text[1].endswith("2 variants")
    assert run_cli("versions", "drbh/gray-app", "--json", env=hub.env(tmp_path)).returncode == 0


def test_versions_of_a_plain_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "k" / "build").mkdir(parents=True)
    proc = run_cli("versions", tmp_path / "k", check=False)
    assert proc.returncode == 2 and "is a plain folder: it has no versions" in proc.stderr


# -- lock-driven conversion ------------------------------------------------------------------
def test_a_locked_project_converts_the_locked_commit_verified(hub: Hub, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "locked", "--json", env=hub.env(tmp_path))
    assert "drbh/img2gray: 2 variant(s) at" in proc.stderr and "match kernels.lock" in proc.stderr
    result = json.loads(proc.stdout)
    assert [k["revision"]["commit"] for k in result["kernels"]] == [hub.commit("drbh/img2gray", "v1.1.2")]
    # The lock's SHA gives the same bytes as the release asked for by its version.
    run_cli("to-wheel", "drbh/img2gray", "1.1.2", "-o", tmp_path / "by-version", env=hub.env(tmp_path))
    locked = {p.name: p.read_bytes() for p in (tmp_path / "locked").glob("*.whl")}
    by_version = {p.name: p.read_bytes() for p in (tmp_path / "by-version").glob("*.whl")}
    assert len(locked) == 2 and locked == by_version


def test_selection_filters_apply_to_a_locked_run(hub: Hub, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    run_cli("to-wheel", "--lock", project / "kernels.lock", "--backend", "cpu", "-o", tmp_path / "out",
            env=hub.env(tmp_path))
    assert [p.name for p in (tmp_path / "out").glob("*.whl")] == [
        "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]


def test_a_lock_without_hashes_pins_the_commit(hub: Hub, tmp_path: Path) -> None:
    """kernels 0.17 writes commits only (the lock here is written by its own KernelLocks):
    the run is pinned to them."""
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1}, hashes=False)
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path))
    assert "this lock has no variant hashes" in proc.stderr
    assert len(list((tmp_path / "out").glob("*.whl"))) == 2


CHANGES = {
    "one byte of a file": {f"{CPU}/_ops.py": "changed"},
    "a file added": {f"{CPU}/extra.py": blob_id(b"extra\n")},
    "a file removed": {f"{CPU}/_ops.py": None},
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_lock_that_disagrees_with_the_hub_is_refused_with_nothing_written(
        hub: Hub, tmp_path: Path, change: dict[str, str | None]) -> None:
    if "changed" in change.values():  # the locked _ops.py had one byte more than the Hub's
        ops = subprocess.run(["git", "-C", str(hub.repo("drbh/img2gray")), "show",
                              f"v1.1.2:build/{CPU}/_ops.py"], capture_output=True, check=True).stdout
        change = {f"{CPU}/_ops.py": blob_id(ops + b"#")}
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1}, changed={"drbh/img2gray": change})
    locked = json.loads((project / "kernels.lock").read_text())[0]["variants"][CPU]["hash"]
    actual = lock_hash(hub.listing("drbh/img2gray", hub.commit("drbh/img2gray", "v1.1.2"), CPU))
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path), check=False)
    one_line_error(proc, "drbh/img2gray", f"build/{CPU}", f"hashes to {actual}", f"kernels.lock says {locked}", status=1)
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "hf").rglob(f"*{CPU}*/*.so"))  # refused before downloading


def test_a_variant_the_lock_does_not_know_is_refused(hub: Hub, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    lock = json.loads((project / "kernels.lock").read_text())
    del lock[0]["variants"][CUDA]
    (project / "kernels.lock").write_text(json.dumps(lock))
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path), check=False)
    one_line_error(proc, f"build/{CUDA}", "is not in kernels.lock", status=1)
    assert not (tmp_path / "out").exists()
    # Leaving it out is the user's choice to make:
    run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", "--backend", "cpu", env=hub.env(tmp_path))


def test_an_unlocked_dependency_is_refused(hub: Hub, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    with (project / "pyproject.toml").open("a") as out:
        out.write('"drbh/gray-app" = 1\n')
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path), check=False)
    one_line_error(proc, "depends on drbh/gray-app, which kernels.lock does not lock", status=1)


def test_all_locked_kernels_or_none(hub: Hub, tmp_path: Path) -> None:
    """The second kernel fails its lock: the first one's wheels are not written either."""
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1, "drbh/gray-helper": 1},
                       changed={"drbh/gray-helper": {"torch-cpu/__init__.py": blob_id(b"x")}})
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path), check=False)
    one_line_error(proc, "drbh/gray-helper", "build/torch-cpu", status=1)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "expected"), [
    ("not json", "is not JSON"),
    ("[]", "expected a non-empty list"),
    ('[{"repo_id": "../../etc", "sha": "' + "a" * 40 + '", "variants": {}}]', "is not a Hub repository id"),
    ('[{"repo_id": "a/b", "sha": "../x", "variants": {}}]', "is not a commit id"),
    ('[{"repo_id": "a/b", "sha": "' + "a" * 40 + '", "variants": {"../x": {"hash": "sha256-00"}}}]',
     "a variant"),
    ('[{"repo_id": "a/b", "sha": "' + "a" * 40 + '", "variants": {"v": {"hash": "md5-0"}}}]',
     "not sha256-<64 hex digits>"),
])
def test_a_broken_lock_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "kernels.lock").write_text(text)
    proc = run_cli("to-wheel", "--lock", tmp_path / "kernels.lock", "-o", tmp_path / "out", check=False)
    one_line_error(proc, expected, status=1)


# -- kernel-to-kernel dependencies ----------------------------------------------------------------
def test_a_kernel_dependency_becomes_requires_dist(hub: Hub, tmp_path: Path) -> None:
    run_cli("to-wheel", "drbh/gray-app", "1.0.0", "-o", tmp_path, env=hub.env(tmp_path))
    (wheel,) = tmp_path.glob("*.whl")
    meta = Metadata.from_email(read_member(wheel, ".dist-info/METADATA"), validate=True)
    assert [str(r) for r in meta.requires_dist or []] == ["torch", "gray-helper<2,>=1"]


# -- get_kernel on installed wheels, the Hub gone ----------------------------------------------------
@pytest.fixture(scope="module")
def kernels_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with torch 2.13.0 (CPU) and the `kernels` library."""
    return make_kernels_venv(tmp_path_factory.mktemp("kernels-venv") / "venv",
                             tmp_path_factory.mktemp("torch-wheel"))


GET_KERNEL = """
import json, sys, torch
from pathlib import Path
from kernels import get_kernel
from kernels._rust import Digest, Metadata
sys.path.insert(0, sys.argv[1])
from support.gray import reference_gray
kernel = get_kernel("drbh/img2gray", version=1)
image = torch.randint(0, 256, (37, 61, 3), dtype=torch.uint8)
app = get_kernel("drbh/gray-app", version=1)
checked = []
for path in json.loads(sys.argv[2]):
    metadata = Metadata.read_from_file(Path(path) / "metadata.json")
    metadata.digest.validate(Digest.hash_variant(metadata.digest.algorithm, Path(path)))
    checked.append(path)
import img2gray  # and the plain import still works beside it
print(json.dumps({"equal": bool(torch.equal(kernel.img2gray(image), reference_gray(image))),
                  "file": kernel.__file__, "answer": app.ANSWER, "verified": len(checked),
                  "import": bool(torch.equal(img2gray.img2gray(image), reference_gray(image)))}))
"""


@pytest.fixture
def stoppable_hub(hub: Hub, tmp_path: Path) -> Iterator[Hub]:
    """Another olah over the same repositories, for a test that stops it."""
    (tmp_path / "own-hub").mkdir()
    with olah_server(tmp_path / "own-hub", hub.mirror, "kernels/drbh/img2gray") as olah:
        yield Hub(olah, hub.mirror)


def test_get_kernel_loads_the_installed_wheels_offline(stoppable_hub: Hub, kernels_venv: Path,
                                                       tmp_path: Path) -> None:
    hub = stoppable_hub
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1, "drbh/gray-app": 1,
                                                   "drbh/gray-helper": 1})
    env = hub.env(tmp_path)
    run_cli("to-wheel", "--lock", project, "-o", tmp_path / "wheels", env=env)
    run_cli("index", tmp_path / "wheels", "-o", tmp_path / "site")
    for name in ("img2gray", "gray-app", "gray-helper"):
        run_cli("install", name, "--index-url", (tmp_path / "site" / "simple").as_uri(),
                "--python", kernels_venv)
    listed = json.loads(run_cli("local-kernels", "--python", kernels_venv, "--json").stdout)
    assert {k["repo_id"] for k in listed} == {"drbh/img2gray", "drbh/gray-app", "drbh/gray-helper"}
    mapping = run_cli("local-kernels", "--python", kernels_venv).stdout.strip()
    shell = run_cli("local-kernels", "--python", kernels_venv, "--shell").stdout.strip()
    assert shell.startswith("export LOCAL_KERNELS=") and mapping in shell
    hub.olah.process.terminate()  # the Hub is gone from here on
    hub.olah.process.wait(timeout=60)
    offline = {**os.environ, "LOCAL_KERNELS": mapping, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf"),
               "HF_ENDPOINT": hub.olah.endpoint}
    proc = subprocess.run([str(kernels_venv), "-c", GET_KERNEL, str(Path(__file__).parent),
                           json.dumps([k["path"] for k in listed])],
                          capture_output=True, text=True, env=offline, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"equal": True, "answer": 42, "verified": 3, "import": True,
                      "file": str(Path(listed[[k["repo_id"] for k in listed].index("drbh/img2gray")]["path"])
                                  / "__init__.py")}
    assert not (tmp_path / "empty-hf" / "hub").exists() or not any((tmp_path / "empty-hf" / "hub").iterdir())
    assert run_op(kernels_venv)["equal"] is True


def test_local_kernels_without_kernel_wheels_is_empty(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    proc = run_cli("local-kernels", "--python", python)
    assert proc.stdout.strip() == "" and "no kernel wheel from the Hub is mapped there" in proc.stderr
    # --shell unsets the variable: kernels refuses an empty LOCAL_KERNELS on every get_kernel.
    shell = run_cli("local-kernels", "--python", python, "--shell")
    assert shell.stdout == "unset LOCAL_KERNELS\n"


def test_a_locked_run_names_each_wheel_once(hub: Hub, tmp_path: Path) -> None:
    """Issue #33: each wheel was named when staged and again when placed."""
    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", env=hub.env(tmp_path))
    wheels = sorted(p.name for p in (tmp_path / "out").glob("*.whl"))
    assert len(wheels) == 2
    for name in wheels:
        assert proc.stderr.count(name) == 1, proc.stderr


def test_a_locked_run_writes_a_pylock_per_target_that_uv_installs(hub: Hub, tmp_path: Path) -> None:
    """Issue #33: `to-wheel --lock --pylock URL` pins the published wheels for installers
    (PEP 751), one file per build target; a real `uv pip install -r` installs from it,
    checked against the hashes."""
    from support.servers_index import pip_env, static_server

    project = _project(tmp_path / "project", hub, {"drbh/img2gray": 1})
    site = tmp_path / "site"
    site.mkdir()
    with static_server(site) as base:
        proc = run_cli("to-wheel", "--lock", project, "-o", tmp_path / "out", "--pylock",
                       base + "files", "--json", env=hub.env(tmp_path))
        written = sorted(Path(p).name for p in json.loads(proc.stdout)["pylock"])
        assert written == ["pylock.torch213-cxx11-cpu.toml", "pylock.torch214-cxx11-cu130.toml"]
        run_cli("index", *(tmp_path / "out").glob("*.whl"), "-o", site)
        lock = tmp_path / "out" / "pylock.torch213-cxx11-cpu.toml"
        text = lock.read_text()
        cpu_wheel = next((tmp_path / "out").glob("img2gray-1.1.2+torch213cpu*.whl"))
        assert cpu_wheel.name in text and "torch214cu130" not in text
        assert hashlib.sha256(cpu_wheel.read_bytes()).hexdigest() in text
        python = make_venv(tmp_path / "venv", torch=torch_wheel(tmp_path / "torch-wheel"))
        installed = subprocess.run([UV, "pip", "install", "--python", str(python), "-r", str(lock)],
                                   capture_output=True, text=True, env=pip_env())
        assert installed.returncode == 0, installed.stderr
        frozen = subprocess.run([UV, "pip", "freeze", "--python", str(python)],
                                capture_output=True, text=True, env=pip_env()).stdout
        assert "img2gray==1.1.2+torch213cpucxx11" in frozen, frozen
        # The hashes are enforced: a lock whose hash is wrong installs nothing.
        (tmp_path / "bad").mkdir()
        bad = tmp_path / "bad" / "pylock.toml"
        bad.write_text(text.replace(hashlib.sha256(cpu_wheel.read_bytes()).hexdigest(), "0" * 64))
        other = make_venv(tmp_path / "venv2", torch=torch_wheel(tmp_path / "torch-wheel"))
        refused = subprocess.run([UV, "pip", "install", "--python", str(other), "-r", str(bad)],
                                 capture_output=True, text=True, env=pip_env())
        assert refused.returncode != 0 and "hash" in refused.stderr.lower(), refused.stderr


def test_pylock_needs_a_lock_and_a_files_url(tmp_path: Path) -> None:
    one_line_error(run_cli("to-wheel", tmp_path, "1.0", "--pylock", "http://h/files/", check=False),
                   "--pylock goes with --lock", status=2)
    one_line_error(run_cli("to-wheel", "--lock", tmp_path, "--pylock", "ftp://h/files/", check=False),
                   "--pylock ftp://h/files/", status=2)
