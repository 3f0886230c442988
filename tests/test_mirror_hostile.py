"""`kernel-wheels mirror` against hostile inputs (issue #30): repositories that give one
project, an organisation listing that names another author's repository, and state,
pending, pages and ownership records edited by hand or by an attacker.

Every case runs the real command (a new process) against the loopback Hub of
``support/serve_hub.py`` and a real folder destination, and compares the destination
byte for byte before and after."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.helpers import one_line_error, run_cli
from support.mirror_hub import folder_snapshot, s3_server
from support.serve_hub import HostileHub, HubRepo, commit_of, hostile_hub, universal_files

STATE = ".kernel-wheels/mirror/state"
PENDING = ".kernel-wheels/mirror/pending"
PAGES = ".kernel-wheels/mirror/pages.json"


def kernel(name: str, *versions: str, value: int = 1) -> HubRepo:
    return HubRepo({f"v{v}": commit_of(f"{name} {v}") for v in versions}, universal_files(value))


def env_for(hub: HostileHub, tmp_path: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf-home"),
            "KERNEL_WHEELS_CACHE": str(tmp_path / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def mirror(*args: str | Path, env: dict[str, str], check: bool = True):  # type: ignore[no-untyped-def]
    return run_cli("mirror", *args, env=env, check=check)


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The keys written, replaced or removed between two snapshots."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def pages_hold_their_files(site: Path) -> int:
    """Every file a JSON page lists is there with the sha256 the page names (what pip
    checks); returns how many entries were checked."""
    checked = 0
    for page_path in site.rglob("index.json"):
        page = json.loads(page_path.read_bytes())
        for entry in page.get("files", ()):
            wheel = site / "files" / entry["filename"]
            assert wheel.is_file(), f"{page_path} lists {entry['filename']}, which is not there"
            assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["hashes"]["sha256"], \
                f"{page_path}: {entry['filename']} does not have the sha256 the page names"
            checked += 1
    return checked


# -- two repositories, one project ---------------------------------------------------------

@pytest.mark.parametrize(("owner", "rival"), [("x/k-a", "x/k_a"), ("x/ka", "y/ka")])
def test_a_second_repository_of_one_project_is_refused_before_anything_is_written(
        tmp_path: Path, owner: str, rival: str) -> None:
    repos = {owner: kernel(owner, "1.0.0", value=1), rival: kernel(rival, "1.0.0", value=2)}
    with hostile_hub(**repos) as hub:
        env = env_for(hub, tmp_path)
        site = tmp_path / "site"
        mirror(owner, "--to", site, env=env)
        before = folder_snapshot(site)

        refused = mirror(rival, "--to", site, "--json", env=env, check=False)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr, refused.stderr
        assert changed(before, folder_snapshot(site)) == []  # byte for byte: no wheel, record, page
        items = json.loads(refused.stdout)["items"]
        assert [(i["status"], i["repo"]) for i in items] == [("refused", rival)], items
        assert f"{owner} gives the project" in items[0]["detail"], items
        assert pages_hold_their_files(site) == 1

        # Nothing is left that blocks a later run of the owner: a new release goes in.
        hub.repos[owner].tags["v1.1.0"] = commit_of(f"{owner} 1.1.0")
        later = json.loads(mirror(owner, "--to", site, "--json", env=env).stdout)
        assert [(i["status"], i["version"]) for i in later["items"]] == [("added", "1.1.0")]
        assert pages_hold_their_files(site) == 2

        # Both named in one run: the owner's work is done, the rival's refused.
        hub.repos[owner].tags["v1.2.0"] = commit_of(f"{owner} 1.2.0")
        both = mirror(owner, rival, "--to", site, "--json", env=env, check=False)
        assert both.returncode == 1 and "Traceback" not in both.stderr, both.stderr
        rows = [(i["status"], i["repo"], i["version"]) for i in json.loads(both.stdout)["items"]]
        assert rows == [("added", owner, "1.2.0"), ("refused", rival, "1.0.0")], rows
        assert pages_hold_their_files(site) == 3



def test_a_bucket_keeps_its_bytes_when_a_second_repository_of_one_project_is_refused(tmp_path: Path) -> None:
    """The same on S3 (moto's server on 127.0.0.1): the ownership record is created with
    ``If-None-Match: *``, and the refused run writes no object."""
    (tmp_path / "s3").mkdir()
    with s3_server(tmp_path / "s3") as s3, \
            hostile_hub(**{"x/ka": kernel("x/ka", "1.0.0"), "y/ka": kernel("y/ka", "1.0.0", value=2)}) as hub:
        env = {**env_for(hub, tmp_path), **s3.env()}
        bucket = s3.bucket("one-project")
        mirror("x/ka", "--to", f"s3://{bucket}/m", env=env)
        before = s3.snapshot(bucket, "m")
        refused = mirror("y/ka", "--to", f"s3://{bucket}/m", "--json", env=env, check=False)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert changed(before, s3.snapshot(bucket, "m")) == []  # byte for byte
        assert [i["status"] for i in json.loads(refused.stdout)["items"]] == ["refused"]
        assert json.loads(before[".kernel-wheels/mirror/owners/ka.json"]) == {"project": "ka", "repo": "x/ka"}

def test_two_new_repositories_of_one_project_in_one_run_are_both_refused(tmp_path: Path) -> None:
    """Neither owns the project yet: which one a run (or each of N shards) would pick must
    not depend on order, so neither is taken and nothing is written."""
    with hostile_hub(**{"x/k-a": kernel("x/k-a", "1.0.0"), "x/k_a": kernel("x/k_a", "1.0.0", value=2),
                        "x/other": kernel("x/other", "1.0.0")}) as hub:
        env = env_for(hub, tmp_path)
        site = tmp_path / "site"
        proc = mirror("x/k-a", "x/k_a", "x/other", "--to", site, "--json", env=env, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        rows = [(i["status"], i["repo"]) for i in json.loads(proc.stdout)["items"]]
        assert rows == [("refused", "x/k-a"), ("refused", "x/k_a"), ("added", "x/other")], rows
        assert sorted(p.name for p in (site / "files").glob("*.whl")) == ["other-1.0.0-py3-none-any.whl"]
        assert not (site / "simple" / "k-a").exists()



def test_two_runs_at_once_for_two_repositories_of_one_project_take_it_once(tmp_path: Path) -> None:
    """Two runs started together, one per repository: the ownership record's conditional
    put lets exactly one of them write; the other is refused, whichever comes first."""
    with hostile_hub(**{"x/k-a": kernel("x/k-a", "1.0.0", "1.1.0"),
                        "x/k_a": kernel("x/k_a", "1.0.0", "1.1.0", value=2)}) as hub:
        env = {**os.environ, **env_for(hub, tmp_path)}
        site = tmp_path / "site"
        runs = {repo: subprocess.Popen([sys.executable, "-m", "kernel_wheels", "mirror", repo, "--to", str(site),
                                        "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True) for repo in ("x/k-a", "x/k_a")}
        results = {repo: (run.communicate(timeout=600), run.returncode) for repo, run in runs.items()}
        codes = sorted(code for _, code in results.values())
        assert codes == [0, 1], results
        winner = next(repo for repo, (_, code) in results.items() if code == 0)
        loser = next(repo for repo in results if repo != winner)
        (out, err), _ = results[loser]
        assert "Traceback" not in err, err
        rows = {(i["status"], i["repo"]) for i in json.loads(out)["items"]}
        assert rows == {("refused", loser)}, rows
        owner = json.loads((site / ".kernel-wheels/mirror/owners/k-a.json").read_bytes())
        assert owner == {"project": "k-a", "repo": winner}
        assert sorted(p.name for p in (site / STATE / "x").iterdir()) == [f"{winner.split('/')[1]}.json"]
        assert not (site / PENDING).exists() or not list((site / PENDING).rglob("*.json"))
        assert pages_hold_their_files(site) == 2

def test_a_leftover_pending_record_of_another_repository_blocks_nothing(tmp_path: Path) -> None:
    """A pending record that an older run left for a repository that does not own its
    project (the owner's wheel name, its own bytes): the owner's next run goes on, drops
    that record with a warning, and never deletes the owner's objects."""
    with hostile_hub(**{"x/k-a": kernel("x/k-a", "1.0.0")}) as hub:
        env = env_for(hub, tmp_path)
        site = tmp_path / "site"
        mirror("x/k-a", "--to", site, env=env)
        state = json.loads((site / STATE / "x/k-a.json").read_bytes())
        record = {**state["records"][0], "repo": "x/k_a", "commit": commit_of("x/k_a 1.0.0"),
                  "sha256": "0" * 64}
        leftover = site / PENDING / f"x/k_a/1.0.0/torch-universal@{record['commit']}.json"
        leftover.parent.mkdir(parents=True)
        leftover.write_text(json.dumps(record))
        wheel = (site / "files/k_a-1.0.0-py3-none-any.whl").read_bytes()

        hub.repos["x/k-a"].tags["v1.1.0"] = commit_of("x/k-a 1.1.0")
        proc = mirror("x/k-a", "--to", site, "--json", env=env, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "x/k_a" in proc.stderr and "k-a" in proc.stderr  # said, not hidden
        assert not leftover.exists()
        assert (site / "files/k_a-1.0.0-py3-none-any.whl").read_bytes() == wheel
        assert pages_hold_their_files(site) == 2
        again = mirror("x/k-a", "--to", site, "--json", env=env)
        assert json.loads(again.stdout)["counts"]["skipped"] == 2


# -- --org: only that organisation's repositories -------------------------------------------

def test_org_takes_only_repositories_of_that_organisation(tmp_path: Path) -> None:
    repos = {"x/one": kernel("x/one", "1.0.0"), "evil/ka": kernel("evil/ka", "1.0.0"),
             "X/two": kernel("X/two", "1.0.0"),
             # one project, but only one of them has releases: no rival, nothing refused
             "x/k-a": kernel("x/k-a", "1.0.0"), "x/k_a": HubRepo({}, {"README.md": b"# notes\n"})}
    with hostile_hub(**repos) as hub:
        listing = [{"id": r, "modelId": r, "author": "x"} for r in ("x/one", "evil/ka", "X/two", "x/k-a", "x/k_a")]
        hub.rule(r"^GET /api/kernels\?", "raw", content_type="application/json",
                 body=json.dumps(listing).encode())
        hub.rule(r"^GET /api/models\?", "raw", content_type="application/json", body=b"[]")
        site = tmp_path / "site"
        proc = mirror("--org", "x", "--to", site, "--json", env=env_for(hub, tmp_path))
        rows = [(i["status"], i["repo"]) for i in json.loads(proc.stdout)["items"]]
        assert rows == [("added", "X/two"), ("added", "x/k-a"), ("added", "x/one")], rows  # Hub ids: any case
        assert "warning: --org x: the Hub's listing names evil/ka, a repository of another " \
               "organisation: skipped" in proc.stderr, proc.stderr
        assert not hub.count(r"evil")  # never even read
        assert not (site / "simple" / "ka").exists()


# -- tampered records ------------------------------------------------------------------------

NESTED = "[" * 100_000 + "]" * 100_000


def _state_path(site: Path, repo: str = "x/one") -> Path:
    return site / STATE / f"{repo}.json"


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:  # type: ignore[type-arg]
    data = json.loads(path.read_bytes())
    change(data)
    path.write_text(json.dumps(data))


def _first_record(data: dict, **fields: object) -> None:  # type: ignore[type-arg]
    data["records"][0].update(fields)


def _add_record(data: dict, **fields: object) -> None:  # type: ignore[type-arg]
    data["records"].append({**data["records"][0], **fields})


def _pending(site: Path, record: dict, key_repo: str = "x/one",  # type: ignore[type-arg]
             name: str | None = None) -> None:
    key = site / PENDING / key_repo / record["version"] / (name or f"{record['variant']}@{record['commit']}.json")
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(json.dumps(record))


def _record(site: Path, repo: str = "x/one") -> dict:  # type: ignore[type-arg]
    return dict(json.loads(_state_path(site, repo).read_bytes())["records"][0])


#: name -> (what is done to the mirrored folder, what the one error line holds, extra args)
TAMPERED: dict[str, tuple[Callable[[Path], None], str, tuple[str, ...]]] = {
    "state nested 100,000 deep": (lambda s: _state_path(s).write_text(NESTED), "state/x/one.json", ()),
    "state record of wrong types": (
        lambda s: _edit_json(_state_path(s), lambda d: _first_record(d, yanked={"a": [1]})),
        "state/x/one.json", ()),
    "state record of another repository": (
        lambda s: _edit_json(_state_path(s), lambda d: _add_record(d, repo="x/two", project="two",
                                                                  wheel="two-1.0.0-py3-none-any.whl")),
        "state/x/one.json", ()),
    "state record naming another project's wheel, pruned": (
        lambda s: _edit_json(_state_path(s), lambda d: _add_record(d, version="0.9.0", tag="v0.9.0",
                                                                  wheel="two-1.0.0-py3-none-any.whl")),
        "state/x/one.json", ("--prune",)),
    "state garbage naming another project's page": (
        lambda s: _edit_json(_state_path(s), lambda d: d.update(garbage=["simple/two/index.html"])),
        "state/x/one.json", ()),
    "state garbage naming another project's wheel": (
        lambda s: _edit_json(_state_path(s), lambda d: d.update(garbage=["files/two-1.0.0-py3-none-any.whl"])),
        "state/x/one.json", ()),
    "pending nested 100,000 deep": (
        lambda s: _pending(s, _record(s)) or next((s / PENDING).rglob("*.json")).write_text(NESTED),
        "pending/x/one/1.0.0/torch-universal@", ()),
    "pending record under another repository's key": (
        lambda s: _pending(s, _record(s, "x/two"), key_repo="x/one"), "pending/x/one/1.0.0/", ()),
    "pending record under another commit's key": (
        lambda s: _pending(s, _record(s), name=f"torch-universal@{commit_of('elsewhere')}.json"),
        "pending/x/one/1.0.0/", ()),
    "pending key of another shape": (
        lambda s: _pending(s, _record(s), name="x.json"), "pending/x/one/1.0.0/x.json", ()),
    "pages nested 100,000 deep": (lambda s: (s / PAGES).write_text(NESTED), "pages.json", ()),
    "pages of wrong types": (
        lambda s: _edit_json(s / PAGES, lambda d: d.update(targets=5)), "pages.json", ()),
    "pages index outside its folder": (
        lambda s: _edit_json(s / PAGES, lambda d: d.update(indexes={**d["indexes"], "x/..": ["two"]},
                                                            dirty=["x/two"])),
        "pages.json", ()),
    "pages naming a repository outside": (
        lambda s: _edit_json(s / PAGES, lambda d: d.update(dirty=["../../../../etc/passwd"])), "pages.json", ()),
}


@pytest.fixture
def two_kernels(tmp_path: Path) -> Iterator[tuple[HostileHub, dict[str, str], Path]]:
    with hostile_hub(**{"x/one": kernel("x/one", "1.0.0"), "x/two": kernel("x/two", "1.0.0")}) as hub:
        env = env_for(hub, tmp_path)
        site = tmp_path / "site"
        mirror("x/one", "x/two", "--to", site, env=env)
        yield hub, env, site


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_record_is_one_line_and_deletes_nothing(
        two_kernels: tuple[HostileHub, dict[str, str], Path], case: str) -> None:
    hub, env, site = two_kernels
    tamper, where, args = TAMPERED[case]
    published = {k: v for k, v in folder_snapshot(site).items() if not k.startswith(".kernel-wheels/")}
    tamper(site)
    # A new release of x/one: the run reads the records rather than skipping the listing.
    hub.repos["x/one"].tags["v1.1.0"] = commit_of("x/one 1.1.0")
    proc = mirror("x/one", "x/two", "--to", site, *args, env=env, check=False)
    line = one_line_error(proc, where, status=1)
    assert "Traceback" not in proc.stderr and len(line) < 600, proc.stderr
    after = folder_snapshot(site)
    assert [k for k, v in published.items() if after.get(k) != v] == []  # nothing published changed
    assert pages_hold_their_files(site) >= 2


def test_a_lease_nested_100000_deep_is_taken_over(two_kernels: tuple[HostileHub, dict[str, str], Path]) -> None:
    hub, env, site = two_kernels
    (site / ".kernel-wheels/mirror/lease").write_text(NESTED)
    hub.repos["x/one"].tags["v1.1.0"] = commit_of("x/one 1.1.0")
    proc = mirror("x/one", "x/two", "--to", site, env=env, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "taking over a lease its holder left" in proc.stderr
    assert not (site / ".kernel-wheels/mirror/lease").exists()
    assert pages_hold_their_files(site) == 3


# -- every record reader, any JSON: a record of its own, or one line ------------------------

GOOD = {"repo": "x/one", "version": "1.0.0", "tag": "v1.0.0", "commit": commit_of("x/one 1.0.0"),
        "variant": "torch-universal", "wheel": "one-1.0.0-py3-none-any.whl", "project": "one",
        "sha256": "a" * 64, "size": 10, "requires_python": ">=3.9", "metadata_sha256": "b" * 64,
        "yanked": None}
GOOD_PAGES = {"format": 1, "targets": ["torch213-cxx11-cpu"], "indexes": {"": ["one"], "torch213-cxx11-cpu": ["one"]},
              "owners": {"one": "x/one"}, "covered": {"x/one": "c" * 64}, "dirty": ["x/one"]}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.sampled_from(["", "x/one", "x/two", "../..", "files/two-1.0.0-py3-none-any.whl", "simple/two/index.html",
                       "torch213-cxx11-cpu", "one", "two", "x/..", "a" * 64, "one-1.0.0-py3-none-any.whl"])
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _mutated(base: dict, data: st.DataObject) -> object:  # type: ignore[type-arg]
    """``base`` with one field replaced, removed or added, or any JSON value at all."""
    choice = data.draw(st.sampled_from(["replace", "remove", "add", "anything"]))
    value = dict(base)
    if choice == "anything":
        return data.draw(json_values)
    if choice == "add":
        value[data.draw(st.text(max_size=8))] = data.draw(json_values)
        return value
    field = data.draw(st.sampled_from(sorted(base)))
    if choice == "remove":
        del value[field]
    else:
        value[field] = data.draw(json_values)
    return value


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_record_is_read_as_one_of_its_own_or_refused_in_one_line(tmp_path: Path, data: st.DataObject) -> None:
    """A state, a pending record, pages.json and an ownership record, each any JSON (or a
    valid one with one field changed): read, it is either refused with a typed error (one
    line) or everything it names is of its own repository's project: no other exception,
    no name a finish could turn into another project's key."""
    from kernel_wheels.errors import KernelWheelsError
    from kernel_wheels.mirror.owners import Owners, owner_key
    from kernel_wheels.mirror.state import PagesRecord, load_pending, load_state
    from kernel_wheels.mirror.store import FolderDestination

    store = FolderDestination(tmp_path / data.draw(st.uuids()).hex)
    kind = data.draw(st.sampled_from(["state", "pending", "pages", "owner"]))
    try:
        if kind == "state":
            state = {"format": 1, "repo": "x/one", "records": [GOOD], "garbage": ["files/" + GOOD["wheel"]]}
            store.put(f"{STATE}/x/one.json", json.dumps(_mutated(state, data)).encode())
            if data.draw(st.booleans()):  # or one of its records changed
                state["records"] = [_mutated(GOOD, data)]
                store.put(f"{STATE}/x/one.json", json.dumps(state).encode())
            loaded = load_state(store, "x/one")
            named = [r.wheel for r in loaded.records.values()] + \
                [g.removeprefix("files/").removesuffix(".metadata") for g in loaded.garbage]
            assert all(w.startswith("one-1.0.0") and "/" not in w for w in named), named
            assert all(g.startswith("files/one-") for g in loaded.garbage), loaded.garbage
            assert all(r.repo == "x/one" and r.project == "one" for r in loaded.records.values())
        elif kind == "pending":
            key = f"{PENDING}/x/one/1.0.0/torch-universal@{GOOD['commit']}.json"
            store.put(key, json.dumps(_mutated(GOOD, data)).encode())
            for record in load_pending(store, [key]):
                assert (record.repo, record.version, record.variant, record.commit) == \
                    ("x/one", "1.0.0", "torch-universal", GOOD["commit"])
                assert record.project == "one" and record.wheel.startswith("one-1.0.0")
        elif kind == "pages":
            store.put(PAGES, json.dumps(_mutated(GOOD_PAGES, data)).encode())
            pages = PagesRecord.load(store)
            assert pages.targets <= {"torch213-cxx11-cpu"} and set(pages.indexes) <= {"", "torch213-cxx11-cpu"}
            assert all("/" not in p and "." not in p for ps in pages.indexes.values() for p in ps)
            assert all(".." not in r for r in pages.dirty | set(pages.covered) | set(pages.owners.values()))
        else:
            store.put(owner_key("one"), json.dumps(_mutated({"project": "one", "repo": "x/one"}, data)).encode())
            assert Owners(store, PagesRecord()).owner("one") in ("x/one", "X/one")
    except KernelWheelsError as exc:
        assert "\n" not in exc.message and len(exc.message) < 600, exc.message


def test_a_state_key_that_names_no_repository_is_one_line(tmp_path: Path) -> None:
    """A file under state/ whose name is no repository id: the finish would read and
    write a state under that name (every state is read when the targets change)."""
    from kernel_wheels.errors import DistributionError
    from kernel_wheels.mirror.state import state_repos
    from kernel_wheels.mirror.store import FolderDestination

    store = FolderDestination(tmp_path / "site")
    store.put(f"{STATE}/x/one.json", b"{}")
    assert state_repos(store) == ["x/one"]
    store.put(f"{STATE}/x/one/deeper.json", b"{}")
    with pytest.raises(DistributionError, match=r"state/x/one/deeper\.json is not a state record's key"):
        state_repos(store)
