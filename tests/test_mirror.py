"""`kernel-wheels mirror`: kernels of the local olah Hub into a folder and into a bucket
of moto's S3 server on 127.0.0.1, as a user runs it (a new process each time); a Hub mirror
without listings, and an s3:// destination and its credentials checked before the Hub is
asked."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest

from support.helpers import free_port, make_venv, one_line_error, run_cli, stop, wait_for
from support.hostile_index import HostileIndex, answer
from support.mirror_hub import KERNELS, S3Server, folder_snapshot, git, mirror_hub, s3_server, write_release
from support.serve_hub import HubRepo, commit_of, hostile_hub, universal_files
from support.servers_index import pip_env, pypiserver

REPOS = sorted(KERNELS)


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mirror_hub(tmp_path_factory.mktemp("mirror-hub")) as (endpoint, _repos):
        yield endpoint


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def _env(endpoint: str, tmp_path: Path, s3: S3Server) -> dict[str, str]:
    return {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            **s3.env()}


@pytest.fixture
def env(hub: str, tmp_path: Path, s3: S3Server) -> dict[str, str]:
    return _env(hub, tmp_path, s3)


_buckets = iter(range(1_000_000))


def new_bucket(s3: S3Server) -> str:
    return s3.bucket(f"mirror-{os.getpid()}-{next(_buckets)}")


def mirror(*args: str | Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_cli("mirror", *args, env=env, check=check)


def as_json(proc: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    return json.loads(proc.stdout)


def check_pages(objects: dict[str, bytes]) -> int:
    """Every file every JSON page lists exists, complete (its sha256), with its
    .metadata; every HTML page lists the same files. Returns the files referenced."""
    referenced = 0
    for key, data in objects.items():
        if not key.endswith("/index.json") or "/simple/" not in f"/{key}" or key.startswith(".kernel-wheels"):
            continue
        page = json.loads(data)
        if "files" not in page:  # a root page: each project it lists has a page
            for project in page["projects"]:
                assert key.replace("index.json", f"{project['name']}/index.json") in objects, key
            continue
        # The HTML form follows the JSON form: a run killed in between left only the latter.
        html = objects.get(key.replace("index.json", "index.html"), b"").decode()
        for entry in page["files"]:
            target = unquote(urljoin(key, entry["url"]))
            assert target in objects, f"{key} lists {target}, which is not there"
            assert hashlib.sha256(objects[target]).hexdigest() == entry["hashes"]["sha256"], target
            assert target + ".metadata" in objects
            assert not html or entry["filename"] in html
            referenced += 1
    return referenced


def test_folder_and_bucket_hold_the_same_bytes_and_a_rerun_writes_nothing(
        env: dict[str, str], s3: S3Server, tmp_path: Path) -> None:
    site = tmp_path / "site"
    bucket = new_bucket(s3)
    run = mirror(*REPOS, "--to", site, "--json", env=env)
    first = as_json(run)
    to_bucket = mirror(*REPOS, "--to", f"s3://{bucket}/kernels", "--progress-bar", "on", env=env)
    items = sum(len(v) for releases in KERNELS.values() for _, v in releases)
    assert first["counts"]["added"] == items and first["counts"]["refused"] == 0
    # Progress per repository and overall (bytes, rate) on stderr; the table on stdout.
    assert "mirror-org/alpha: 3 release(s), 16 variant(s)" in run.stderr
    assert f"[{items}/{items}] mirror-org/gamma 3.0.0" in run.stderr \
        and re.search(r"overall [\d.]+ [kMG]?B at [\d.]+ [kMG]?B/s\)", run.stderr)
    # --progress-bar on (a terminal's default): an overall bar of the planned items too.
    assert re.search(rf"mirroring: 100%.*\| {items}/{items} \[", to_bucket.stderr), to_bucket.stderr[-500:]
    assert "mirroring:" not in run.stderr  # not a terminal: lines only
    table = to_bucket.stdout.splitlines()
    assert sum(line.startswith("added  mirror-org/") for line in table) == items
    assert table[-1].startswith(f"s3://{bucket}/kernels: {items} added, 0 skipped;")

    folder = folder_snapshot(site)
    assert folder == s3.snapshot(bucket, "kernels")
    assert check_pages(folder) >= items
    state = json.loads(folder[".kernel-wheels/mirror/state/mirror-org/alpha.json"])
    record = next(r for r in state["records"] if r["version"] == "1.1.0" and r["variant"] == "torch-cpu")
    assert record["sha256"] == hashlib.sha256(folder[f"files/{record['wheel']}"]).hexdigest()
    assert len(record["commit"]) == 40 and record["tag"] == "v1.1.0"

    mtimes = {p: p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file()}
    again = mirror(*REPOS, "--to", site, env=env)
    assert f"0 added, {items} skipped" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file()} == mtimes
    rerun = as_json(mirror(*REPOS, "--to", f"s3://{bucket}/kernels", "--json", env=env))
    assert rerun["counts"]["skipped"] == items and rerun["pages_written"] == 0
    assert s3.snapshot(bucket, "kernels") == folder


def test_pip_installs_from_the_mirror(env: dict[str, str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    mirror("mirror-org/alpha", "mirror-org/beta", "--to", site, "--variant", "torch-universal",
           "--variant", "torch213-*", env=env)
    port = free_port()
    log = tmp_path / "http.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "http.server", "-d", str(site), "-b", "127.0.0.1",
                                   str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/simple/alpha/", server, log)
        python = make_venv(tmp_path / "venv")
        pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--index-url"]
        quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        show = [str(python), "-c", "import beta; print(beta.VERSION, beta.VARIANT)"]
        subprocess.run([*pip, f"http://127.0.0.1:{port}/simple", "beta==0.1.0"], check=True,
                       capture_output=True, env=quiet)
        out = subprocess.run(show, check=True, capture_output=True, text=True).stdout
        assert out.split() == ["0.1.0", "torch-universal"]
        # A target's index lists the build for that target: plain pip picks it (its
        # import guard wants torch, which this venv lacks: the installed version says it).
        subprocess.run([*pip, f"http://127.0.0.1:{port}/torch213-cxx11-cpu/simple", "--force-reinstall",
                        "alpha"], check=True, capture_output=True, env=quiet)
        version = [str(python), "-c", "import importlib.metadata as m; print(m.version('alpha'))"]
        out = subprocess.run(version, check=True, capture_output=True, text=True).stdout
        assert out.strip() == "2.0.0+torch213cpucxx11"
    finally:
        stop(server)


def test_dry_run_lists_the_plan_and_downloads_nothing(env: dict[str, str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    plan = as_json(mirror("mirror-org/alpha", "--to", site, "--dry-run", "--json", env=env))
    assert plan["dry_run"] and plan["counts"]["planned"] == 16
    assert {(i["version"], i["variant"]) for i in plan["items"]} >= {("2.0.0", "torch-rocm")}
    assert not site.exists()
    assert not (tmp_path / "hf-home").exists() or not list((tmp_path / "hf-home").rglob("*.py"))


def test_version_and_variant_selection(env: dict[str, str], tmp_path: Path) -> None:
    newest = as_json(mirror("mirror-org/alpha", "--to", tmp_path / "a", "--newest", "1", "--dry-run", "--json",
                            env=env))
    assert {i["version"] for i in newest["items"]} == {"1.1.0", "2.0.0"}
    ranged = as_json(mirror("mirror-org/alpha", "--to", tmp_path / "b", "--versions", ">=1.1,<2",
                            "--backend", "cuda", "--json", env=env))
    assert [(i["status"], i["version"], i["variant"]) for i in ranged["items"]] == \
        [("added", "1.1.0", "torch-cuda"), ("added", "1.1.0", "torch27-cxx11-cu128-x86_64-linux")]
    assert sorted(p.name for p in (tmp_path / "b" / "files").glob("*.whl")) == \
        ["alpha-1.1.0+cuda-py3-none-any.whl",
         "alpha-1.1.0+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
    assert (tmp_path / "b" / "torch27-cxx11-cu128" / "simple" / "alpha" / "index.html").is_file()


def test_a_wider_filter_adds_only_the_new_variants(env: dict[str, str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    narrow = as_json(mirror("mirror-org/beta", "--to", site, "--variant", "torch-universal", "--json", env=env))
    assert narrow["counts"]["added"] == 2
    before = {p.name: p.stat().st_mtime_ns for p in (site / "files").iterdir()}
    wide = as_json(mirror("mirror-org/beta", "--to", site, "--json", env=env))
    assert wide["counts"] == {**wide["counts"], "added": 1, "skipped": 2}
    assert [(i["version"], i["variant"]) for i in wide["items"]] == [("0.2.0", "torch-cpu")]
    after = {p.name: p.stat().st_mtime_ns for p in (site / "files").iterdir()}
    assert {k: v for k, v in after.items() if k in before} == before  # nothing converted again
    again = as_json(mirror("mirror-org/beta", "--to", site, "--json", env=env))
    assert again["counts"]["skipped"] == 3 and again["pages_written"] == 0


def test_a_lock_mirrors_the_locked_release(env: dict[str, str], hub: str, tmp_path: Path) -> None:
    refs = json.loads(subprocess.run([sys.executable, "-c", (
        "import json,sys; from huggingface_hub import HfApi; "
        "r = HfApi().list_repo_refs('mirror-org/beta', repo_type='kernel'); "
        "print(json.dumps({t.name: t.target_commit for t in r.tags}))")],
        env={**os.environ, **env}, check=True, capture_output=True, text=True).stdout)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"dependency": {"repo-id": "mirror-org/beta", "version": 0},
                                 "lock": {"commit": refs["v0.1.0"]}}]))
    result = as_json(mirror("--lock", lock, "--to", tmp_path / "site", "--json", env=env))
    assert [(i["status"], i["version"], i["variant"]) for i in result["items"]] == \
        [("added", "0.1.0", "torch-universal")]
    # The lock names one release: the others are not "deleted", nothing is yanked.
    again = as_json(mirror("--lock", lock, "--to", tmp_path / "site", "--json", env=env))
    assert again["counts"]["yanked"] == 0 and again["counts"]["skipped"] == 1


@pytest.mark.parametrize(("args", "message"), [
    ((), "name what to mirror: REPO ..., --org ORG or --lock FILE"),
    (("mirror-org/alpha", "--shard", "4/4"), "--shard '4/4': give K/N with 0 <= K < N"),
    (("mirror-org/alpha", "--versions", "1.0 or so"), "--versions '1.0 or so' is not a version range"),
    (("mirror-org/alpha", "--newest", "0"), "--newest 0: give a number of releases of at least 1"),
    (("mirror-org/alpha", "--backend", "cuad"), "--backend 'cuad' is not a backend"),
    (("mirror-org/nothing",), "mirror-org/nothing"),
    (("../etc",), "is not a repository id"),
    (("--lock", "missing.lock"), "missing.lock does not exist"),
])
def test_bad_input_is_one_line(env: dict[str, str], tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    proc = mirror(*args, "--to", tmp_path / "site", env=env, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("kernel-wheels: error: ") and message in lines[-1], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--to", "https://pypi.example/"), "--to https://pypi.example/: an index server has no place for "
                                        "the mirror's state; give --state DEST"),
    (("--to", "https://pypi.example/", "--state", "https://other.example/"),
     "--state https://other.example/: the mirror's state needs a folder or s3://BUCKET/PREFIX"),
    (("--to", "site", "--state", "state"), "--state is for an index server --to"),
    (("--to", "https://pypi.example/", "--state", "state", "--prune"),
     "--prune: an index server's upload API cannot remove or replace a file"),
    (("--to", "https://pypi.example/", "--state", "state", "--replace-moved"),
     "--replace-moved: an index server's upload API cannot remove or replace a file"),
    (("--to", "s3://B/x"), "--to s3://B/x: give s3://BUCKET/PREFIX"),
    (("--to", "ftp://host/x"), "give a folder, s3://BUCKET/PREFIX or an http(s):// index server URL"),
])
def test_bad_destination_is_one_line(env: dict[str, str], args: tuple[str, ...], message: str) -> None:
    # a repository the Hub does not have: each mistake is found before anything is asked
    proc = mirror("mirror-org/not-there", *args, env={**env, "TWINE_USERNAME": "u", "TWINE_PASSWORD": "p"},
                  check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_missing_bucket_is_one_line(env: dict[str, str]) -> None:
    proc = mirror("mirror-org/beta", "--to", "s3://no-such-bucket/k", env=env, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "s3://no-such-bucket/k" in proc.stderr and "NoSuchBucket" in proc.stderr


def test_four_shards_give_the_bytes_of_one_run(env: dict[str, str], s3: S3Server) -> None:
    whole, sharded = new_bucket(s3), new_bucket(s3)
    mirror(*REPOS, "--to", f"s3://{whole}/k", env=env)
    cmd = [sys.executable, "-m", "kernel_wheels", "mirror", *REPOS, "--to", f"s3://{sharded}/k", "--json"]
    workers = [subprocess.Popen([*cmd, "--shard", f"{k}/4"], env={**os.environ, **env},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(4)]
    results = [(w.communicate(timeout=600), w.returncode) for w in workers]
    assert all(code == 0 for _, code in results), results
    added = [json.loads(out)["counts"]["added"] for (out, _), _ in results]
    assert sum(added) == sum(len(v) for releases in KERNELS.values() for _, v in releases)
    assert sum(a > 0 for a in added) >= 3  # the work was split, not done by one
    assert s3.snapshot(sharded, "k") == s3.snapshot(whole, "k")


def test_org_mirrors_exactly_that_organisations_repositories(tmp_path: Path, s3: S3Server) -> None:
    """olah cannot list an author's repositories: a loopback Hub that can (serve_hub),
    asked by the real huggingface_hub."""
    def kernel(name: str, *versions: str) -> HubRepo:
        return HubRepo({f"v{v}": commit_of(f"{name} {v}") for v in versions}, universal_files(len(versions)))

    older = kernel("two", "0.1.0")
    older.repo_type = "model"  # published before the Hub's kernel repo type: listed as a model
    repos = {"org-a/one": kernel("one", "1.0.0", "1.1.0"), "org-a/two": older,
             "org-a/notes": HubRepo({}, {"README.md": b"# not a kernel\n"}),  # no release, no build/
             "org-b/three": kernel("three", "1.0.0"), "org-ab/four": kernel("four", "2.0.0")}
    with hostile_hub(**repos) as hub:
        env = {**_env(hub.endpoint, tmp_path, s3)}
        site = tmp_path / "site"
        result = as_json(mirror("--org", "org-a", "--to", site, "--json", env=env))
        assert hub.count(r"^GET /api/models\?.*author=org-a") == 1  # both listings asked
        assert hub.count(r"^GET /api/kernels\?.*author=org-a") == 1
        assert [(i["status"], i["repo"], i["version"]) for i in result["items"]] == \
            [("added", "org-a/one", "1.0.0"), ("added", "org-a/one", "1.1.0"), ("added", "org-a/two", "0.1.0")]
        assert sorted(p.name for p in (site / "files").glob("*.whl")) == \
            ["one-1.0.0-py3-none-any.whl", "one-1.1.0-py3-none-any.whl", "two-0.1.0-py3-none-any.whl"]
        assert sorted(p.name for p in (site / ".kernel-wheels/mirror/state").rglob("*.json")) == ["one.json", "two.json"]
        assert not hub.count(r"org-b/three|org-ab/four")  # another organisation's: never even read
        nobody = mirror("--org", "org-c", "--to", site, env=env, check=False)
        assert nobody.returncode == 1 and nobody.stderr.strip().splitlines()[-1] == \
            "kernel-wheels: error: --org org-c: the Hub lists no repositories of this organisation"
        # A Hub mirror that offers only one of the two listings still lists what it can;
        # one that offers neither is named in one line.
        hub.rule(r"^GET /api/kernels\?", "raw", status=404, content_type="application/json",
                 body=b'{"error": "Not Found"}')
        partial = as_json(mirror("--org", "org-a", "--to", tmp_path / "site2", "--json", env=env))
        assert [(i["repo"], i["version"]) for i in partial["items"]] == [("org-a/two", "0.1.0")]
        # A listing page that fails transiently is asked again, as every Hub question is.
        hub.rule(r"^GET /api/models\?", "raw", status=503, content_type="text/plain", body=b"busy",
                 times=1)
        before = hub.count(r"^GET /api/models\?")
        retried = mirror("--org", "org-a", "--to", tmp_path / "site-retried", "--json", env=env)
        assert hub.count(r"^GET /api/models\?") == before + 2
        assert "warning: --org org-a: the Hub's model listing: HTTP 503" in retried.stderr, retried.stderr
        assert [(i["repo"], i["version"]) for i in as_json(retried)["items"]] == [("org-a/two", "0.1.0")]
        # A listing that fails (rather than is not offered) stops the run: going on with the
        # other would drop that listing's repositories without a word.
        down = hub.rule(r"^GET /api/models\?", "raw", status=500, content_type="text/plain", body=b"down")
        failed = mirror("--org", "org-a", "--to", tmp_path / "site3", env=env, check=False)
        assert failed.returncode == 1 and failed.stderr.strip().splitlines()[-1] == \
            "kernel-wheels: error: --org org-a: the Hub's model listing failed: HTTP 500", failed.stderr
        down.status, down.content_type, down.body = 404, "application/json", b'{"error": "Not Found"}'
        neither = mirror("--org", "org-a", "--to", tmp_path / "site3", env=env, check=False)
        assert neither.returncode == 1 and neither.stderr.strip().splitlines()[-1] == \
            "kernel-wheels: error: --org org-a: the Hub did not list its repositories " \
            "(kernel listing: HTTP 404; model listing: HTTP 404)", neither.stderr
        assert not (tmp_path / "site3" / "files").exists()


def test_org_listing_pages_stay_on_the_hub_and_the_token_with_it(tmp_path: Path, s3: S3Server) -> None:
    """A hostile Hub's author listing names a next page on another host (HF_TOKEN would go
    with it through a plain client), then answers a page that is no listing: each stops
    the run with one line, before anything is written, and the token reaches the Hub only."""
    token = "hf_org_listing_secret_token"
    repos = {"org-a/one": HubRepo({"v1.0.0": commit_of("one 1.0.0")}, universal_files(1))}
    with hostile_hub(**repos) as hub, hostile_hub() as elsewhere:
        env = {**_env(hub.endpoint, tmp_path, s3), "HF_TOKEN": token}
        page = json.dumps([{"id": "org-a/one"}]).encode()
        hub.rule(r"^GET /api/kernels\?", "raw", content_type="application/json", body=page,
                 headers={"Link": f'<{elsewhere.endpoint}/api/kernels?author=org-a&cursor=2>; rel="next"'})
        site = tmp_path / "site"
        proc = mirror("--org", "org-a", "--to", site, env=env, check=False)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 1 and last.startswith(
            "kernel-wheels: error: --org org-a: the Hub's kernel listing: the listing's next page is "
            f"on another host ({elsewhere.endpoint}/api/kernels?author=org-a&cursor=2"), proc.stderr
        assert not elsewhere.requests  # not asked at all, let alone with the token
        asked = dict(zip(hub.requests, hub.authorizations, strict=True))
        assert asked["GET /api/kernels?author=org-a"] == f"Bearer {token}", asked  # the Hub gets it
        assert token not in proc.stderr + proc.stdout
        assert not site.exists()

        hub.rules.clear()
        hub.rule(r"^GET /api/kernels\?", "raw", content_type="application/json", body=b'{"id": "org-a/one"}')
        odd = mirror("--org", "org-a", "--to", site, env=env, check=False)
        assert odd.returncode == 1 and odd.stderr.strip().splitlines()[-1] == \
            "kernel-wheels: error: --org org-a: the Hub's kernel listing: a page is not a list of repositories"
        assert not site.exists()


# -- Hub changes: a repository of its own, served by an olah of its own ------------------

@pytest.fixture
def changing_hub(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with mirror_hub(tmp_path / "hub") as (endpoint, repos):
        yield endpoint, repos / "kernels" / "mirror-org" / "beta"


def test_new_releases_are_added_deleted_ones_yanked_then_pruned(
        changing_hub: tuple[str, Path], tmp_path: Path, s3: S3Server) -> None:
    endpoint, repo = changing_hub
    env = _env(endpoint, tmp_path, s3)
    dest = f"s3://{new_bucket(s3)}/m"
    bucket = dest.split("/")[2]
    mirror("mirror-org/beta", "--to", dest, env=env)

    write_release(repo, "0.3.0", ("torch-universal",), step=10)
    added = as_json(mirror("mirror-org/beta", "--to", dest, "--json", env=env))
    assert [(i["status"], i["version"]) for i in added["items"] if i["status"] != "skipped"] == \
        [("added", "0.3.0")]

    git(repo, "tag", "-d", "v0.1.0")
    yanked = as_json(mirror("mirror-org/beta", "--to", dest, "--json", env=env))
    assert [(i["status"], i["version"]) for i in yanked["items"] if i["status"] != "skipped"] == \
        [("yanked", "0.1.0")]
    objects = s3.snapshot(bucket, "m")
    page = json.loads(objects["simple/beta/index.json"])
    flags = {f["filename"]: f["yanked"] for f in page["files"]}
    assert flags["beta-0.1.0-py3-none-any.whl"] == "deleted on the Hub"
    assert flags["beta-0.3.0-py3-none-any.whl"] is False
    assert 'data-yanked="deleted on the Hub"' in objects["simple/beta/index.html"].decode()
    assert "files/beta-0.1.0-py3-none-any.whl" in objects  # a pinned install still works
    check_pages(objects)

    pruned = as_json(mirror("mirror-org/beta", "--to", dest, "--prune", "--json", env=env))
    assert [(i["status"], i["version"]) for i in pruned["items"] if i["status"] != "skipped"] == \
        [("pruned", "0.1.0")]
    objects = s3.snapshot(bucket, "m")
    assert not [k for k in objects if "0.1.0" in k and not k.startswith(".kernel-wheels/")]
    check_pages(objects)


def test_a_moved_tag_is_reported_and_left_alone_unless_replaced(
        changing_hub: tuple[str, Path], tmp_path: Path, s3: S3Server) -> None:
    endpoint, repo = changing_hub
    env = _env(endpoint, tmp_path, s3)
    site = tmp_path / "site"
    mirror("mirror-org/beta", "--to", site, env=env)
    before = folder_snapshot(site)
    write_release(repo, "0.2.0", ("torch-universal", "torch-cpu"), step=20)  # v0.2.0 moves

    moved = as_json(mirror("mirror-org/beta", "--to", site, "--json", env=env))
    rows = [(i["status"], i["version"], i["variant"]) for i in moved["items"] if i["status"] != "skipped"]
    assert rows == [("moved", "0.2.0", "torch-cpu"), ("moved", "0.2.0", "torch-universal")]
    assert "v0.2.0 moved from" in moved["items"][-1]["detail"]
    assert folder_snapshot(site) == before

    replaced = as_json(mirror("mirror-org/beta", "--to", site, "--replace-moved", "--json", env=env))
    assert replaced["counts"]["replaced"] == 2
    after = folder_snapshot(site)
    state = json.loads(after[".kernel-wheels/mirror/state/mirror-org/beta.json"])
    commits = {r["version"]: r["commit"] for r in state["records"]}
    assert commits["0.2.0"] == git(repo, "rev-parse", "v0.2.0")
    check_pages(after)


# -- an index server as --to --------------------------------------------------------------

def test_an_index_server_gets_the_wheels_and_a_folder_keeps_the_state(
        changing_hub: tuple[str, Path], tmp_path: Path, s3: S3Server) -> None:
    endpoint, repo = changing_hub
    with pypiserver(tmp_path / "pypi") as server:
        env = {**_env(endpoint, tmp_path, s3), "TWINE_USERNAME": server.username,
               "TWINE_PASSWORD": server.password}
        state = tmp_path / "state"
        args = ("mirror-org/beta", "--to", server.upload_url, "--state", state, "--json")
        first = as_json(mirror(*args, env=env))
        assert first["counts"]["added"] == 3 and first["destination"] == f"{server.upload_url} (state in {state})"
        # Two releases on the server, each file the one the state records; no pages or
        # files beside the state (the server lists the wheels itself).
        records = json.loads((state / ".kernel-wheels/mirror/state/mirror-org/beta.json").read_text())["records"]
        listing = server.listing("beta")
        assert listing == {r["wheel"]: r["sha256"] for r in records} and len(listing) == 3
        assert sorted(p.name for p in state.iterdir()) == [".kernel-wheels"]
        packages = tmp_path / "pypi" / "packages"
        uploaded = {p.name: p.stat().st_mtime_ns for p in packages.iterdir()}

        again = as_json(mirror(*args, env=env))
        assert again["counts"]["added"] == 0 and again["counts"]["skipped"] == 3
        assert {p.name: p.stat().st_mtime_ns for p in packages.iterdir()} == uploaded  # nothing uploaded
        assert again["pages_written"] is None  # the server lists the wheels: no pages

        # A new state (lost, or another machine's): the files are on the server already,
        # and the run says so instead of "added"; its summary speaks of no pages.
        fresh = mirror("mirror-org/beta", "--to", server.upload_url, "--state", tmp_path / "state2", env=env)
        table = fresh.stdout.splitlines()
        assert sum(line.startswith("present  mirror-org/beta ") for line in table) == 3, fresh.stdout
        assert all("(already on the index server, same sha256; not uploaded)" in line
                   for line in table if line.startswith("present"))
        assert table[-1] == f"{server.upload_url} (state in {tmp_path / 'state2'}): 0 added, 3 present, 0 skipped"
        assert "page" not in fresh.stdout
        assert {p.name: p.stat().st_mtime_ns for p in packages.iterdir()} == uploaded

        python = make_venv(tmp_path / "venv")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--index-url", server.simple_url,
                        "beta==0.1.0"], check=True, capture_output=True, env=pip_env())
        out = subprocess.run([str(python), "-c", "import beta; print(beta.VERSION, beta.VARIANT)"],
                             check=True, capture_output=True, text=True).stdout
        assert out.split() == ["0.1.0", "torch-universal"]

        # A release deleted on the Hub: the upload API cannot yank it, and the run says so.
        git(repo, "tag", "-d", "v0.1.0")
        gone = mirror(*args[:-1], env=env)
        assert re.search(r"^not-yanked +mirror-org/beta +0\.1\.0 .*deleted on the Hub; not yanked \(index server\)$",
                         gone.stdout, re.MULTILINE), gone.stdout
        assert "0 yanked" not in gone.stdout and "1 not-yanked" in gone.stdout
        assert server.listing("beta") == listing


# -- kills --------------------------------------------------------------------------------

KILL_REPOS = ("mirror-org/beta", "mirror-org/gamma")


def test_a_run_killed_at_any_write_is_finished_by_the_next(env: dict[str, str], s3: S3Server) -> None:
    reference = new_bucket(s3)
    mirror(*KILL_REPOS, "--to", f"s3://{reference}/k", env=env)
    expected = s3.snapshot(reference, "k")
    writes = len(expected) + 4 + 2  # objects, pending records and lease, state rewrites
    # Every other write while wheel objects go up (they are alike: each a pure function of
    # its key), and every one of the last writes, where records, lease, state and pages
    # follow one another.
    points = sorted(set(range(1, writes + 1, 2)) | set(range(max(1, writes - 12), writes + 1)))
    killed_at = []
    for k in points:
        bucket = new_bucket(s3)
        dest = f"s3://{bucket}/k"
        # -j 1: one process makes every write (the hook kills the process that writes).
        proc = mirror(*KILL_REPOS, "--to", dest, "-j", "1",
                      env={**env, "KERNEL_WHEELS_MIRROR_KILL_AFTER_WRITES": str(k)}, check=False)
        if proc.returncode == 0:
            break  # the run has fewer writes than k
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        killed_at.append(k)
        check_pages(s3.snapshot(bucket, "k"))
        mirror(*KILL_REPOS, "--to", dest, env=env)
        assert s3.snapshot(bucket, "k") == expected, f"killed after write {k}"
    assert len(killed_at) >= 15, killed_at


def test_runs_killed_from_outside_are_finished_by_the_next(env: dict[str, str], s3: S3Server) -> None:
    reference = new_bucket(s3)
    mirror(*KILL_REPOS, "--to", f"s3://{reference}/k", env=env)
    expected = s3.snapshot(reference, "k")
    for objects_before_kill in (1, 3, 6, 9, 12, 15):
        bucket = new_bucket(s3)
        cmd = [sys.executable, "-m", "kernel_wheels", "mirror", *KILL_REPOS, "--to", f"s3://{bucket}/k"]
        worker = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        while worker.poll() is None and len(s3.snapshot(bucket)) < objects_before_kill:
            time.sleep(0.01)  # polling the bucket: the condition, not a fixed wait
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        check_pages(s3.snapshot(bucket, "k"))
        mirror(*KILL_REPOS, "--to", f"s3://{bucket}/k", env=env)
        assert s3.snapshot(bucket, "k") == expected, f"killed after {objects_before_kill} objects"


def test_two_runs_at_once_give_the_bytes_of_one(env: dict[str, str], s3: S3Server) -> None:
    reference, shared = new_bucket(s3), new_bucket(s3)
    mirror(*KILL_REPOS, "--to", f"s3://{reference}/k", env=env)
    cmd = [sys.executable, "-m", "kernel_wheels", "mirror", *KILL_REPOS, "--to", f"s3://{shared}/k"]
    runs = [subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    assert all(r.wait(timeout=600) == 0 for r in runs)
    assert s3.snapshot(shared, "k") == s3.snapshot(reference, "k")


def test_a_folder_write_survives_another_runs_clean_up_of_the_temporary_folder(tmp_path: Path) -> None:
    """Shards into one folder (a Slurm array's tasks): each run removes the folder of
    temporary files when it finds it empty, before and after its finish, while another run
    writes under the lease. The interleaving driven: the other run's clean-up comes just
    after this run named its temporary file, before it wrote it. The write landed; it used
    to fail the task with "No such file or directory: .../.kernel-wheels/tmp/PID-...", the
    folder gone."""
    from kernel_wheels.mirror.store import TEMP_DIR, FolderDestination

    site = tmp_path / "site"
    other = FolderDestination(site)

    class CleanedMeanwhile(FolderDestination):
        def _temp(self) -> Path:
            path = super()._temp()
            other.clean_temp()  # another shard's clean-up, between naming and writing
            return path

    store = CleanedMeanwhile(site)
    source = tmp_path / "k-1.0-py3-none-any.whl"
    source.write_bytes(b"wheel")
    assert store.put(".kernel-wheels/mirror/pages.json", b"{}")
    assert store.put("simple/k/index.html", b"<html>", if_absent=True)
    store.put_file("files/k-1.0-py3-none-any.whl", source)
    assert sorted(store.keys("")) == [".kernel-wheels/mirror/pages.json", "files/k-1.0-py3-none-any.whl",
                                      "simple/k/index.html"]
    assert (site / "files" / "k-1.0-py3-none-any.whl").read_bytes() == b"wheel"
    other.clean_temp()
    assert not (site / TEMP_DIR).exists()  # nothing of the temporary files left behind


def test_mirror_org_against_a_server_without_listings_says_so(tmp_path: Path) -> None:
    with HostileIndex() as hub:
        # A Hub mirror that answers every path with its HTML front page.
        for kind in ("kernels", "models"):
            hub.routes[f"/api/{kind}"] = answer(200, b"<html><body>a mirror</body></html>")
        proc = run_cli("mirror", "--org", "acme", "--to", tmp_path / "site",
                       env={"HF_ENDPOINT": hub.base.rstrip("/"), "HF_HOME": str(tmp_path / "hf")},
                       check=False)
    line = one_line_error(proc, "--org acme", "listing", status=1)
    assert "Expecting value" not in line and "char 0" not in line, line
    assert "name the repositories" in line


@pytest.mark.parametrize("case", ["no credentials", "no bucket"])
def test_mirror_to_s3_checks_destination_and_credentials_before_listing(
        case: str, s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.bucket(f"ux-{case.replace(' ', '-')}") if case == "no credentials" else "ux-missing"
    env = {**s3.env(), "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_CONFIG_FILE": os.devnull,
           "AWS_EC2_METADATA_DISABLED": "true", "HF_HOME": str(tmp_path / "hf")}
    if case == "no credentials":
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env[name] = ""
    with HostileIndex() as hub:
        env["HF_ENDPOINT"] = hub.base.rstrip("/")
        proc = run_cli("mirror", "acme/img2gray", "--to", f"s3://{bucket}/kernels", env=env,
                       check=False)
        assert not hub.seen, "the Hub was asked before the destination was checked"
    if case == "no credentials":
        one_line_error(proc, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", status=2)
    else:
        one_line_error(proc, "ux-missing", "no such bucket", status=1)
