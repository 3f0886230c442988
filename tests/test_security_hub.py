"""A hostile Hub (or mirror) and hostile source trees cannot make kernel-wheels write
outside its folders, leak the token, hang, or crash (issue #18, docs/security.md).

Every case runs the real command against a real server on 127.0.0.1 (tests/support/hostile_hub.py)
or a real folder or git repository, and checks three things a user relies on: one error
line and a non-zero exit (never a traceback), nothing written outside the HF cache, the
tool's cache, the output and temporary folders (a file planted outside stays as it was),
and no credential sent anywhere but the Hub's origin.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import one_line_error, run_cli
from support.hostile_hub import (
    COMMIT,
    REPO,
    TAG,
    VARIANT,
    Answer,
    HostileHub,
    Repo,
    blob_id,
    hostile_hub,
    trickle,
)

PRECIOUS = b"precious: must never change\n"


@pytest.fixture(scope="module")
def hub() -> Iterator[HostileHub]:
    with hostile_hub() as server:
        yield server


@pytest.fixture
def world(hub: HostileHub, tmp_path: Path) -> Path:
    """A fresh HF home, tool cache, temp folder and output per test, and, beside them,
    ``outside/`` holding a file that no run may touch."""
    hub.reset()
    for name in ("hf", "kw-cache", "tmp", "outside"):
        (tmp_path / name).mkdir()
    (tmp_path / "outside" / "victim").write_bytes(PRECIOUS)
    return tmp_path


def env_for(hub: HostileHub, world: Path, **extra: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(world / "hf"), "TMPDIR": str(world / "tmp"),
            "KERNEL_WHEELS_CACHE": str(world / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_TOKEN": "", **extra}


def convert(hub: HostileHub, world: Path, *args: str, version: str = "1.0.0",
            **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli("to-wheel", REPO, *([version] if version else []), "-o", world / "out",
                   "--timeout", "5", "--retries", "0", *args, env=env_for(hub, world, **env),
                   check=False)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def nothing_outside(world: Path) -> None:
    """Only the HF home, the tool's cache, the temp folder and the output changed; the
    planted file is intact (not replaced, not a link)."""
    victim = world / "outside" / "victim"
    assert not victim.is_symlink() and victim.read_bytes() == PRECIOUS
    assert files_under(world / "outside") == {"victim"}
    allowed = {"hf", "kw-cache", "tmp", "out", "outside"}
    assert {p.name for p in world.iterdir()} <= allowed, sorted(p.name for p in world.iterdir())
    assert not list((world / "tmp").iterdir())  # temporary folders are removed


def honest_listing(hub: HostileHub, folder: str, recursive: bool = True) -> list[dict[str, object]]:
    return hub.repo.tree_entries(folder, recursive)


# -- the honest repository converts: every refusal below is the hostile part's doing --------
def test_the_hostile_hub_serves_an_honest_kernel_by_default(hub: HostileHub, world: Path) -> None:
    proc = convert(hub, world)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (world / "out").iterdir()] == ["kernel-1.0.0-py3-none-any.whl"]
    nothing_outside(world)


# -- defect 1: names from the listing and the refs reach the file system -------------------
def _depth_to_world() -> int:
    """``..`` parts from hf/hub/kernels--evil--kernel/snapshots/<commit>/build/<variant>/ up
    to the test's folder."""
    return len(Path("hf/hub/kernels--evil--kernel/snapshots/c/build/v").parts)


TRAVERSALS = {
    "dot-dot out of the variant": f"build/{VARIANT}/" + "../" * _depth_to_world() + "outside/victim",
    "dot-dot deeper than the root": f"build/{VARIANT}/" + "../" * 40 + "tmp/kw-pwned",
    "dot-dot inside the package": f"build/{VARIANT}/kernel/../../../../../x",
    "absolute path": "/outside/victim",
    "empty part": f"build/{VARIANT}//kernel/x.py",
    "dot part": f"build/{VARIANT}/./kernel/x.py",
    "NUL in the name": f"build/{VARIANT}/kernel/x\x00.py",
    "backslashes": f"build\\{VARIANT}\\..\\..\\x",
    "newline in the name": f"build/{VARIANT}/kernel/x\n.py",
    "outside the folder listed": "README.md",
    "256-byte name": f"build/{VARIANT}/kernel/" + "x" * 256,
}


@pytest.mark.parametrize("path", TRAVERSALS.values(), ids=TRAVERSALS.keys())
def test_a_listing_path_that_leads_outside_is_refused(hub: HostileHub, world: Path, path: str) -> None:
    if path.startswith("/"):
        path = str(world) + path  # an absolute path to the planted file
    content = b"attacker's bytes\n"
    entries = honest_listing(hub, f"build/{VARIANT}")
    entries.append({"type": "file", "oid": blob_id(content), "size": len(content), "path": path})
    hub.override(f"tree:build/{VARIANT}", Answer.json(entries))
    hub.override(f"file:{path}", Answer(200, content))
    one_line_error(convert(hub, world), REPO)
    nothing_outside(world)
    # Refused when listed: no file of the variant was even asked for.
    assert not [p for p, _ in hub.requests if "/resolve/" in p and VARIANT in p]


COMMITS = {
    "dot-dot": "../../../../outside/snapshot",
    "absolute": "<world>/outside/snapshot",
    "short hex": "c0ffee",
    "upper-case hex": COMMIT.upper(),
    "hex and a slash": COMMIT[:20] + "/" + COMMIT[21:],
    "null": None,
    "a number": 123,
}


@pytest.mark.parametrize("commit", COMMITS.values(), ids=COMMITS.keys())
@pytest.mark.parametrize("where", ["tag", "branch"])
def test_a_commit_id_that_is_not_one_is_refused(hub: HostileHub, world: Path, commit: object,
                                                where: str) -> None:
    repo = Repo()
    refs = json.loads(repo.refs().body)
    target = refs["tags"][0] if where == "tag" else refs["branches"][0]
    target["targetCommit"] = commit.replace("<world>", str(world)) if isinstance(commit, str) else commit
    hub.override("refs", Answer.json(refs))
    proc = convert(hub, world, *(["--revision", "main"] if where == "branch" else []),
                   version="1.0.0" if where == "tag" else "")
    one_line_error(proc, REPO)
    nothing_outside(world)  # the absolute one aims at outside/snapshot


@pytest.mark.parametrize("sha", ["../../../../outside/snap", "0" * 39, None])
def test_a_revision_answer_with_a_bad_commit_is_refused(hub: HostileHub, world: Path, sha: object) -> None:
    answer = json.loads(Repo().revision().body)
    answer["sha"] = sha
    hub.override("revision", Answer.json(answer))
    one_line_error(convert(hub, world, "--revision", "c0ffee00", version=""), REPO)
    nothing_outside(world)


@pytest.mark.parametrize("ref", ["../../../../outside/ref", "v1..2", "a\nb", ".hidden", "a.lock", "a//b"])
def test_a_ref_name_that_is_not_one_is_refused(hub: HostileHub, world: Path, ref: str) -> None:
    hub.repo.branches = {ref: COMMIT, "main": COMMIT}
    one_line_error(convert(hub, world), REPO)
    nothing_outside(world)


def test_hostile_etag_and_commit_headers_on_the_card_are_ignored(hub: HostileHub, world: Path) -> None:
    """The card used to be fetched with hf_hub_download, which names the blob after the
    server's ETag and the snapshot after X-Repo-Commit."""
    card = hub.repo.files["README.md"]
    hub.override("file:README.md", Answer(200, card, {
        "ETag": '"../../../../../outside/card"', "X-Repo-Commit": "../../../../outside/snap",
        "X-Linked-Etag": '"../../../../../outside/card"'}))
    proc = convert(hub, world)
    assert proc.returncode == 0, proc.stderr
    nothing_outside(world)


# -- defect 4: answers of the wrong shape are one line ----------------------------------
_HTML = Answer(200, b"<html><body>Welcome to the proxy login page</body></html>",
               {"Content-Type": "text/html"})
GARBAGE = {
    "refs: HTML": ("refs", _HTML),
    "refs: empty body": ("refs", Answer(200, b"", {"Content-Type": "application/json"})),
    "refs: a list": ("refs", Answer.json([1, 2, 3])),
    "refs: tags is an object": ("refs", Answer.json({"tags": {}, "branches": [], "converts": []})),
    "refs: tag without targetCommit": ("refs", Answer.json({"tags": [{"name": TAG, "ref": "x"}],
                                                             "branches": [], "converts": []})),
    "refs: nulls": ("refs", Answer.json({"tags": None, "branches": None, "converts": None})),
    "refs: tag name a number": ("refs", Answer.json({"tags": [{"name": 1, "ref": "x", "targetCommit": COMMIT}],
                                                      "branches": [], "converts": []})),
    "refs: truncated JSON": ("refs", Answer(200, b'{"tags": [{"name": "v1', {"Content-Type": "application/json"})),
    "revision: HTML": ("revision", _HTML),
    "revision: lastModified garbage": ("revision", Answer.json({"id": REPO, "sha": COMMIT, "lastModified": "yesterday"})),
    "tree: HTML": ("tree:build", _HTML),
    "tree: an object": ("tree:build", Answer.json({"path": "build"})),
    "tree: a list of strings": ("tree:build", Answer.json(["build/x"])),
    "tree: entry without type": ("tree:build", Answer.json([{"path": f"build/{VARIANT}"}])),
    "variant tree: size a string": ("tree:build/" + VARIANT, "size"),
    "variant tree: size negative": ("tree:build/" + VARIANT, -1),
    "variant tree: oid null": ("tree:build/" + VARIANT, "oid"),
    "variant tree: lfs digest short": ("tree:build/" + VARIANT, "lfs"),
    "variant tree: path null": ("tree:build/" + VARIANT, "path"),
    "variant tree: a file twice, two contents": ("tree:build/" + VARIANT, "twice"),
    "variant tree: a file that is also a folder": ("tree:build/" + VARIANT, "file-folder"),
}


def _spoiled_listing(hub: HostileHub, how: object) -> Answer:
    entries = honest_listing(hub, f"build/{VARIANT}")
    file = next(e for e in entries if e["type"] == "file")
    if how == "size":
        file["size"] = "12"
    elif how == -1:
        file["size"] = -1
    elif how == "oid":
        file["oid"] = None
    elif how == "lfs":
        file["lfs"] = {"oid": "abc", "size": 3, "pointerSize": 134}
    elif how == "path":
        file["path"] = None
    elif how == "twice":
        entries.append({**file, "oid": "f" * 40})
    elif how == "file-folder":
        entries.append({**file, "path": f"{file['path']}/inner.py"})
    return Answer.json(entries)


@pytest.mark.parametrize(("route", "answer"), GARBAGE.values(), ids=GARBAGE.keys())
def test_an_answer_of_the_wrong_shape_is_one_line(hub: HostileHub, world: Path, route: str,
                                                  answer: Answer | object) -> None:
    given = answer if isinstance(answer, Answer) else _spoiled_listing(hub, answer)
    hub.override(route, given)
    proc = convert(hub, world, *(["--revision", COMMIT] if route == "revision" else []),
                   version="" if route == "revision" else "1.0.0")
    if route == "revision" and proc.returncode == 0:
        # The commit's time is optional (a snapshot's version then says so): what matters
        # is that nothing crashed and nothing went astray.
        nothing_outside(world)
        return
    one_line_error(proc)
    nothing_outside(world)


# -- credentials go to the Hub's origin only ------------------------------------------------
def test_a_next_page_on_another_host_gets_no_token(hub: HostileHub, world: Path) -> None:
    with hostile_hub() as elsewhere:
        entries = honest_listing(hub, f"build/{VARIANT}")
        hub.override(f"tree:build/{VARIANT}", Answer.json(entries[:1], **{
            "Link": f'<{elsewhere.endpoint}/api/kernels/{REPO}/tree/{COMMIT}/build%2F{VARIANT}?cursor=2>; rel="next"'}))
        proc = convert(hub, world, HF_TOKEN="hf_secret_token_value")
        one_line_error(proc, "another host")
        assert not elsewhere.requests  # not even asked, let alone with the token
        assert all(auth is None or auth == "Bearer hf_secret_token_value" for _, auth in hub.requests)
        assert "hf_secret_token_value" not in proc.stderr + proc.stdout
    nothing_outside(world)


def test_a_redirect_to_another_host_gets_no_token(hub: HostileHub, world: Path) -> None:
    with hostile_hub() as elsewhere:
        elsewhere.repo = hub.repo
        init = f"build/{VARIANT}/kernel/__init__.py"
        hub.override(f"file:{init}", Answer(302, b"", {
            "Location": f"{elsewhere.endpoint}/{REPO}/resolve/{COMMIT}/{init}"}))
        proc = convert(hub, world, HF_TOKEN="hf_secret_token_value")
        assert proc.returncode == 0, proc.stderr
        assert elsewhere.requests and all(auth is None for _, auth in elsewhere.requests)
    nothing_outside(world)


def test_endless_pagination_ends(hub: HostileHub, world: Path) -> None:
    page = f'<{hub.endpoint}/api/kernels/{REPO}/tree/{COMMIT}/build?cursor=again>; rel="next"'
    hub.override("tree:build", Answer.json([], Link=page))
    one_line_error(convert(hub, world), "more than 1000 pages")
    # ended by counting pages, not by a clock: it stopped at the 1000-page limit
    pages = [path for path, _ in hub.requests if path.endswith(f"/tree/{COMMIT}/build")]
    assert 1000 <= len(pages) <= 1001, len(pages)


# -- defect 6: a trickling Hub is bounded like a stalled one ---------------------------------
@pytest.mark.parametrize("route", ["refs", f"file:build/{VARIANT}/kernel/__init__.py"])
def test_a_trickle_ends_within_the_timeout_bound(hub: HostileHub, world: Path, route: str) -> None:
    """One byte every 1.5 s never trips a 2 s read timeout; with --timeout 2 --retries 1
    the run used to go on for minutes (90 s and still running)."""
    body = hub.repo.refs().body if route == "refs" else hub.repo.files[route.removeprefix("file:")] * 100
    hub.override(route, lambda: Answer(200, b"", {"Content-Type": "application/json"},
                                       writer=trickle(body, 1.5, hub.release)))
    proc = run_cli("to-wheel", REPO, "1.0.0", "-o", world / "out", "--timeout", "2", "--retries", "1",
                   env=env_for(hub, world), check=False)
    one_line_error(proc, "slower than 1000 bytes/s")
    # Each try was cut by the rate guard (a trickle that ran its course would take minutes,
    # and say nothing of a rate), and there were two of them (--retries 1): bounded.
    tail = "/refs" if route == "refs" else "/" + route.removeprefix("file:")
    assert len([path for path, _ in hub.requests if path.endswith(tail)]) == 2, hub.requests
    nothing_outside(world)


# -- defect 5: two tags that spell one version -------------------------------------------------
OTHER = "0badc0de" + "1" * 32


@pytest.mark.parametrize("request_args", [("1.1.2",), (">=1.1,<2",), ("--revision", OTHER)],
                         ids=["exact", "range", "by commit"])
def test_two_tags_that_spell_one_version_are_refused(hub: HostileHub, world: Path,
                                                     request_args: tuple[str, ...]) -> None:
    hub.repo.tags = {"v1.1.2": COMMIT, "v1.01.2": OTHER}
    by_commit = request_args[0] == "--revision"
    hub.repo.commit = OTHER if by_commit else COMMIT
    proc = convert(hub, world, *(request_args if by_commit else ()),
                   version="" if by_commit else request_args[0])
    one_line_error(proc, "v1.1.2", "v1.01.2", "1.1.2")
    assert not (world / "out").exists()


def test_two_tags_of_one_version_on_one_commit_are_fine(hub: HostileHub, world: Path) -> None:
    hub.repo.tags = {"v1.1.2": COMMIT, "v1.01.2": COMMIT}
    proc = convert(hub, world, version="1.1.2")
    assert proc.returncode == 0, proc.stderr


def test_versions_lists_a_release_two_tags_spell_once(hub: HostileHub, world: Path) -> None:
    """``versions`` follows the release rule to-wheel, serve and mirror follow: two tags
    that spell one version are one release, listed once; on different commits it is
    marked ambiguous (in the JSON, the table and one warning line), on one commit not."""
    hub.repo.tags = {"v1.1.2": COMMIT, "v1.01.2": OTHER, "v1.0.0": COMMIT, "v01.0.0": COMMIT}
    env = env_for(hub, world)
    listed = json.loads(run_cli("versions", REPO, "--json", "--retries", "0", env=env).stdout)["versions"]
    assert [(v["kind"], v["version"], v["ref"], v["commit"], v.get("ambiguous")) for v in listed] == [
        ("release", "1.1.2", "v1.1.2", COMMIT, [{"ref": "v1.01.2", "commit": OTHER}]),
        ("release", "1.0.0", "v1.0.0", COMMIT, None)]
    proc = run_cli("versions", REPO, "--retries", "0", env=env)
    rows = [row.split() for row in proc.stdout.splitlines()]
    assert [row[:4] for row in rows[1:]] == [["1.1.2", "release", "(ambiguous)", "v1.1.2"],
                                             ["1.0.0", "release", "v1.0.0", COMMIT[:12]]]
    assert proc.stderr.splitlines() == [
        f"warning: {REPO}: the tags v1.1.2 and v1.01.2 spell version 1.1.2 on different commits: "
        "to-wheel, serve and mirror refuse it (remove one tag, or convert one commit with "
        "--revision COMMIT)"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def _git_kernel(tmp_path: Path) -> Path:
    repo = tmp_path / "git-kernel"
    for path, content in Repo().files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(content)
    _git(repo.parent, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    return repo


def test_two_tags_that_spell_one_version_in_a_git_repository_are_refused(tmp_path: Path) -> None:
    repo = _git_kernel(tmp_path)
    _git(repo, "tag", "v1.1.2")
    (repo / "README.md").write_text("# changed\n")
    _git(repo, "commit", "-qam", "two")
    _git(repo, "tag", "v1.01.2")
    proc = run_cli("to-wheel", repo, "1.1.2", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "v1.1.2", "v1.01.2")
    listed = json.loads(run_cli("versions", repo, "--json").stdout)["versions"]
    assert [(v["version"], v["ref"], [r["ref"] for r in v.get("ambiguous", [])]) for v in listed] == \
        [("1.1.2", "v1.1.2", ["v1.01.2"])]


# -- defects 7 and 8: source trees -------------------------------------------------------------
def _folder_kernel(tmp_path: Path) -> Path:
    root = tmp_path / "folder-kernel"
    for path, content in Repo().files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    return root


def test_a_build_folder_that_links_outside_is_refused(tmp_path: Path) -> None:
    source = _folder_kernel(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(source / "build", elsewhere)
    (source / "build").symlink_to(elsewhere, target_is_directory=True)
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "symbolic link that leads outside the source")
    assert not (tmp_path / "out").exists()


def test_a_variant_folder_that_links_outside_is_refused(tmp_path: Path) -> None:
    source = _folder_kernel(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(source / "build" / VARIANT, elsewhere)
    (source / "build" / VARIANT).symlink_to(elsewhere, target_is_directory=True)
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", check=False)
    one_line_error(proc, VARIANT, "symbolic link that leads outside the source")


def test_a_variant_folder_linked_inside_the_source_converts(tmp_path: Path) -> None:
    source = _folder_kernel(tmp_path)
    shutil.move(source / "build" / VARIANT, source / "real-variant")
    (source / "build" / VARIANT).symlink_to("../real-variant", target_is_directory=True)
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_git_build_link_leading_outside_is_refused(tmp_path: Path) -> None:
    repo = _git_kernel(tmp_path)
    shutil.move(repo / "build", tmp_path / "outside-build")
    (repo / "build").symlink_to("../outside-build", target_is_directory=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "build is a link")
    _git(repo, "tag", "v1.0.0")
    proc = run_cli("to-wheel", repo, "1.0.0", "-o", tmp_path / "out", check=False)
    one_line_error(proc)


@pytest.mark.parametrize("loop", ["two links", "a link to itself", "the variant folder"])
def test_a_symbolic_link_loop_is_one_line(tmp_path: Path, loop: str) -> None:
    source = _folder_kernel(tmp_path)
    package = source / "build" / VARIANT / "kernel"
    if loop == "two links":
        (package / "a").symlink_to("b")
        (package / "b").symlink_to("a")
    elif loop == "a link to itself":
        (package / "self").symlink_to("self")
    else:
        shutil.rmtree(source / "build" / VARIANT)
        (source / "build" / VARIANT).symlink_to(VARIANT)
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "loop")


INITS = {
    "nested too deeply (recursion)": b"a" + b"[0]" * 100_000 + b"\n",
    "nested too deeply (memory)": b"x = " + b"-" * 200_000 + b"1\n",
    "larger than 1 MB": b"# " + b"x" * (2 << 20) + b"\n",
}


@pytest.mark.parametrize("content", INITS.values(), ids=INITS.keys())
def test_an_init_py_the_parser_cannot_take_is_carried_unread(tmp_path: Path, cpu_build: Path,
                                                              content: bytes) -> None:
    """The import guard used to be inserted into a binary build's __init__.py, which had
    to be parsed (a deep or huge file crashed the parser). The guard now lives beside the
    kernel: its __init__.py is carried byte for byte and never parsed."""
    variant = tmp_path / "kernel" / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    (variant / "__init__.py").write_bytes(content)  # the flat package's own
    (variant / "metadata.json").unlink()  # its digests would no longer match
    proc = run_cli("to-wheel", tmp_path / "kernel", "1.0.0", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(f"kernel/{cpu_build.name}/__init__.py") == content


# -- minor: names and texts that break a line or an import ------------------------------------
#: A metadata.json kernels reads (kernels-data refuses one without these keys).
KERNEL_META = {"name": "kernel", "id": "_kernel_x", "version": 1, "license": "apache-2.0",
               "python-depends": [], "backend": {"type": "cpu"}}

@pytest.mark.parametrize("name", ["a..b", "a.b", "my.kernel"])
def test_a_kernel_name_that_gives_no_importable_package_is_refused(tmp_path: Path, name: str) -> None:
    source = _folder_kernel(tmp_path)
    (source / "build" / VARIANT / "metadata.json").write_text(json.dumps({**KERNEL_META, "name": name}))
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", check=False)
    one_line_error(proc, f"'name' '{name}' is not a valid kernel name")  # kernels' rule keeps it importable


def test_a_newline_in_python_depends_is_one_line_and_whole_json(tmp_path: Path) -> None:
    source = _folder_kernel(tmp_path)
    (source / "build" / VARIANT / "metadata.json").write_text(json.dumps(
        {**KERNEL_META, "python-depends": ["einops\nrm -rf /"]}))
    proc = run_cli("to-wheel", source, "1.0.0", "-o", tmp_path / "out", "--json", check=False)
    one_line_error(proc, "einops\\x0arm -rf /")
    error = json.loads(proc.stdout)["error"]
    assert "einops\\x0arm -rf /" in error["message"] and "\n" not in error["message"]


# -- credentials in a git URL never reach a child's argv ------------------------------------------
def test_git_url_credentials_stay_out_of_argv(tmp_path: Path) -> None:
    """A stand-in `git` (named so: it records how it was started, then fails like a
    server that is down) first on PATH; the real command line must not hold the password
    and the header must come through the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.json"
    (bin_dir / "git").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': {{k: v for k, v in os.environ.items() if k.startswith('GIT_CONFIG')}}}}, "
        f"open({str(record)!r}, 'w'))\nsys.stderr.write('fatal: unable to access: stand-in\\n')\nsys.exit(128)\n")
    (bin_dir / "git").chmod(0o755)
    url = "https://someone:s3cr3t-p%40ss@git.example.invalid/org/kernel.git"
    proc = run_cli("to-wheel", url, "1.0.0", "-o", tmp_path / "out", check=False,
                   env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "KERNEL_WHEELS_CACHE": str(tmp_path / "kw")})
    one_line_error(proc)
    recorded = json.loads(record.read_text())
    assert not any("s3cr3t" in arg for arg in recorded["argv"]), recorded["argv"]
    assert "https://git.example.invalid/org/kernel.git" in recorded["argv"]
    assert recorded["env"]["GIT_CONFIG_KEY_0"] == "http.https://git.example.invalid/org/kernel.git.extraHeader"
    assert recorded["env"]["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
    assert "s3cr3t" not in proc.stderr


def test_offline_refs_in_the_hf_cache_are_checked(hub: HostileHub, world: Path) -> None:
    """A local user who can write the HF cache (or a cache restored from elsewhere)
    cannot make an offline run read outside it through a ref file."""
    assert convert(hub, world).returncode == 0
    refs = next((world / "hf").rglob("refs"))
    (refs / TAG).write_text("../../../../outside\n")
    proc = convert(hub, world, "--force", HF_HUB_OFFLINE="1")
    one_line_error(proc, "not a commit id")
    nothing_outside(world)


# -- a lock-driven run: the listing downloaded from is the one checked ------------------------
def test_a_hub_that_changes_its_listing_after_the_lock_check_gains_nothing(hub: HostileHub, world: Path) -> None:
    """The Hub answers the variant's listing honestly while the lock is checked, then
    lists (and serves, consistently) another __init__.py when the files are fetched: the
    Hub source checks the listing it downloads from against the lock again."""
    files = {p.removeprefix(f"build/{VARIANT}/"): blob_id(c) for p, c in hub.repo.files.items()
             if p.startswith(f"build/{VARIANT}/")}
    digest = hashlib.sha256()
    for name, oid in sorted((n.encode(), o) for n, o in files.items()):
        digest.update(name)
        digest.update(bytes.fromhex(oid))
    lock = world / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": REPO, "sha": COMMIT, "variants": {
        VARIANT: {"hash": f"sha256-{digest.hexdigest()}", "hash_type": "git_lfs_concat"}}}]))
    evil = b'"""A kernel."""\nimport os  # not what was locked\nVALUE = 1\n'
    honest = Repo()
    swapped = Repo()
    swapped.files[f"build/{VARIANT}/kernel/__init__.py"] = evil
    calls = {"n": 0}

    def listing() -> Answer:
        calls["n"] += 1
        repo = honest if calls["n"] == 1 else swapped
        return Answer.json(repo.tree_entries(f"build/{VARIANT}", True))

    hub.override(f"tree:build/{VARIANT}", listing)
    hub.override(f"file:build/{VARIANT}/kernel/__init__.py", Answer(200, evil))
    proc = run_cli("to-wheel", "--lock", lock, "-o", world / "out", "--timeout", "5", "--retries", "0",
                   env=env_for(hub, world), check=False)
    one_line_error(proc, REPO, f"build/{VARIANT}", "kernels.lock says")
    assert calls["n"] == 2  # checked when verified, and again when fetched
    assert not (world / "out").exists()
    assert not [p for p, _ in hub.requests if p.endswith("kernel/__init__.py")]  # never downloaded
