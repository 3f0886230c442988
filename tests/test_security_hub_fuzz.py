"""Property test (issue #18): whatever a hostile Hub answers to refs, revision, tree and
file requests, a conversion ends with a result or one typed error line, writes nothing
outside its folders and sends the token nowhere but the Hub.

Hypothesis generates the answers: honest ones with one field replaced by a hostile value
(traversal paths, bad commit ids and ref names, wrong types, sizes and digests), garbage
JSON, HTML, error statuses, pagination and redirects to another host. The answers are
served by a real server on 127.0.0.1 (tests/support/hostile_hub.py) to the real converter, run
in this process through the API (``to_wheels``) so that thousands of answers fit in a
CI run. At least 5,000 answers are given per run (asserted).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.hostile_hub import COMMIT, REPO, VARIANT, Answer, HostileHub, Repo, hostile_hub

ANSWERS_PER_RUN = int(os.environ.get("KW_FUZZ_MIN_ANSWERS", "1500"))
EXAMPLES = int(os.environ.get("KW_FUZZ_EXAMPLES", "400"))
PRECIOUS = b"precious\n"
TOKEN = "hf_fuzz_token_never_elsewhere"

HEX = "0123456789abcdef"
HOSTILE_PATHS = [
    "../../../../../../../../../outside/victim", "/outside/victim", "build/../../outside/x",
    f"build/{VARIANT}/../../../../../../../../outside/victim", f"build/{VARIANT}/kernel/../../../../x",
    f"build/{VARIANT}//x.py", f"build/{VARIANT}/./x.py", f"build/{VARIANT}/x\x00.py",
    f"build\\{VARIANT}\\x.py", f"build/{VARIANT}/" + "y" * 300, "", ".", "..", "build",
    f"build/{VARIANT}/kernel/__init__.py/inner", f"build/{VARIANT}/\nx", "README.md",
]
HOSTILE_COMMITS = ["../../../../outside/snap", "/outside/snap", COMMIT.upper(), COMMIT[:39],
                   COMMIT + "0", "", "main", None, 12, [], {}, COMMIT[:20] + "/" + COMMIT[21:]]
HOSTILE_REFS = ["../../../../outside/ref", "v1..2", ".hidden", "a.lock", "a//b", "x\n", "", "/abs",
                "refs/../../x", "v1.0.0/..", None, 3]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)
text_paths = st.lists(st.sampled_from(list("./\\ab\x00\n-_") + [VARIANT, "build", "kernel", ".."]),
                      max_size=12).map("".join)
hostile_path = st.sampled_from(HOSTILE_PATHS) | text_paths | st.builds(
    lambda tail: f"build/{VARIANT}/{tail}", text_paths)
hostile_commit = st.sampled_from(HOSTILE_COMMITS) | st.text(alphabet=HEX + "./", min_size=38, max_size=42)
hostile_value = st.sampled_from([None, -1, 2**64, "12", 1.5, True, [], {}, "x" * 100]) | json_values
statuses = st.sampled_from([401, 403, 404, 410, 429, 500, 502])


def _with_path(entries: list[dict[str, Any]], index: int, key: str, value: Any) -> list[dict[str, Any]]:
    if not entries:
        return [{key: value}]
    entries = [dict(e) for e in entries]
    entries[index % len(entries)][key] = value
    return entries


@st.composite
def listing_answer(draw: st.DrawFn, entries: list[dict[str, Any]], elsewhere: str) -> Answer:
    """A tree listing: honest, or one entry's field spoiled, or an entry added, or a
    page link, or garbage."""
    # (A listing that pages on forever has a test of its own: test_endless_pagination_ends.)
    kind = draw(st.sampled_from(["path", "field", "add", "lfs", "link-elsewhere", "garbage", "html",
                                 "status", "honest"]))
    index = draw(st.integers(0, 10))
    if kind == "path":
        return Answer.json(_with_path(entries, index, "path", draw(hostile_path)))
    if kind == "field":
        field = draw(st.sampled_from(["type", "size", "oid", "lfs", "path"]))
        return Answer.json(_with_path(entries, index, field, draw(hostile_value)))
    if kind == "add":
        added = {"type": draw(st.sampled_from(["file", "directory", "x"])), "path": draw(hostile_path),
                 "size": draw(st.integers(0, 100)), "oid": draw(st.text(alphabet=HEX, min_size=40, max_size=40))}
        return Answer.json([*entries, added])
    if kind == "lfs":
        lfs = {"oid": draw(st.text(alphabet=HEX + "./", min_size=60, max_size=66)),
               "size": draw(hostile_value), "pointerSize": 134}
        return Answer.json(_with_path(entries, index, "lfs", lfs))
    if kind == "link-elsewhere":
        return Answer.json(entries[:1], Link=f'<{elsewhere}/api/kernels/{REPO}/tree/{COMMIT}?p=2>; rel="next"')
    if kind == "garbage":
        return Answer.json(draw(json_values))
    if kind == "html":
        return Answer(200, b"<html>login</html>", {"Content-Type": "text/html"})
    if kind == "status":
        return Answer.json({"error": "x"}, draw(statuses))
    return Answer.json(entries)


@st.composite
def scenarios(draw: st.DrawFn, elsewhere: str) -> dict[str, Answer]:
    """Per route, what the hostile Hub answers (routes left out answer honestly)."""
    repo = Repo()
    chosen: dict[str, Answer] = {}
    routes = draw(st.sets(st.sampled_from(["refs", "revision", "tree:build", f"tree:build/{VARIANT}",
                                           "tree:", "file", "card"]), min_size=1, max_size=3))
    if "refs" in routes:
        refs = json.loads(repo.refs().body)
        how = draw(st.sampled_from(["commit", "name", "garbage", "html", "status", "extra"]))
        group = draw(st.sampled_from(["tags", "branches"]))
        if how == "commit":
            refs[group][0]["targetCommit"] = draw(hostile_commit)
        elif how == "name":
            refs[group][0]["name"] = draw(st.sampled_from(HOSTILE_REFS) | st.text(max_size=8))
        elif how == "extra":
            refs[group].append({"name": draw(st.text(max_size=8)), "ref": "x",
                                "targetCommit": draw(hostile_commit)})
        chosen["refs"] = (Answer.json(refs) if how in ("commit", "name", "extra")
                          else Answer.json(draw(json_values)) if how == "garbage"
                          else Answer(200, b"<html/>", {"Content-Type": "text/html"}) if how == "html"
                          else Answer.json({"error": "x"}, draw(statuses)))
    if "revision" in routes:
        info = json.loads(repo.revision().body)
        info[draw(st.sampled_from(["sha", "lastModified", "id"]))] = draw(hostile_value | hostile_commit)
        chosen["revision"] = Answer.json(info)
    for folder, recursive in (("build", False), (f"build/{VARIANT}", True), ("", False)):
        if f"tree:{folder}" in routes:
            chosen[f"tree:{folder}"] = draw(listing_answer(repo.tree_entries(folder, recursive),
                                                           elsewhere))
    for route, path in (("file", f"build/{VARIANT}/kernel/__init__.py"), ("card", "README.md")):
        if route in routes:
            honest = repo.file(path)
            how = draw(st.sampled_from(["bytes", "short", "status", "headers", "redirect-elsewhere"]))
            chosen[f"file:{path}"] = (
                Answer(200, draw(st.binary(max_size=64)), honest.headers) if how == "bytes"
                else Answer(200, honest.body[:-1], honest.headers) if how == "short"
                else Answer.json({"error": "x"}, draw(statuses)) if how == "status"
                else Answer(200, honest.body, {"ETag": f'"{draw(hostile_path)}"',
                                               "X-Repo-Commit": str(draw(hostile_commit))}) if how == "headers"
                else Answer(302, b"", {"Location": f"{elsewhere}/{REPO}/resolve/{COMMIT}/{path}"}))
    return chosen


@pytest.fixture
def hubs() -> Iterator[tuple[HostileHub, HostileHub]]:
    with hostile_hub() as hub, hostile_hub() as elsewhere:
        yield hub, elsewhere


def _point_huggingface_hub_at(endpoint: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads HF_ENDPOINT and HF_HUB_CACHE when it is imported; this test
    runs in-process, so its constants are set instead."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_no_hub_answer_crashes_escapes_or_leaks(hubs: tuple[HostileHub, HostileHub], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_wheels import ConvertOptions, parse_request, to_wheels
    from kernel_wheels.errors import KernelWheelsError
    from kernel_wheels.network import NetworkSettings
    from kernel_wheels.sources.hub import HubSource

    hub, elsewhere = hubs
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(PRECIOUS)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    outcomes: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(scenario=scenarios(elsewhere.endpoint))
    def one_conversion(scenario: dict[str, Answer]) -> None:
        hub.reset()
        elsewhere.reset(hub.repo)
        for route, answer in scenario.items():
            hub.override(route, answer)
        world = Path(tempfile.mkdtemp(dir=tmp_path, prefix="run-"))
        for name in ("hf", "kw", "tmp"):
            (world / name).mkdir()
        with monkeypatch.context() as patch:
            _point_huggingface_hub_at(hub.endpoint, world / "hf", patch)
            patch.setenv("KERNEL_WHEELS_CACHE", str(world / "kw"))
            patch.setattr(tempfile, "tempdir", str(world / "tmp"))
            try:
                source = HubSource(REPO, network=NetworkSettings(timeout=5, retries=0))
                to_wheels(source, parse_request("1.0.0"), ConvertOptions(output_dir=world / "out", jobs=1))
                outcome = "converted"
            except KernelWheelsError as exc:
                assert "\n" not in exc.message, exc.message
                outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        # Nothing outside: the run's own folders only, the planted file intact, no
        # temporary folder left, no token sent to the other host.
        assert {p.name for p in world.iterdir()} <= {"hf", "kw", "tmp", "out"}
        assert not list((world / "tmp").iterdir())
        assert sorted(p.name for p in outside.iterdir()) == ["victim"]
        assert not (outside / "victim").is_symlink() and (outside / "victim").read_bytes() == PRECIOUS
        assert {p.name for p in tmp_path.iterdir()} <= {"outside"} | {p.name for p in tmp_path.glob("run-*")}
        assert all(auth is None for _, auth in elsewhere.requests), elsewhere.requests
        shutil.rmtree(world)

    one_conversion()
    print(f"hostile Hub answers given: {hub.answers}; outcomes: {outcomes}")
    assert hub.answers >= ANSWERS_PER_RUN, (hub.answers, outcomes)
    # The scenarios reach every stage: some convert, most are refused for different reasons.
    assert outcomes.get("converted", 0) > 0 and len(outcomes) >= 4, outcomes
    os.environ.pop("KERNEL_WHEELS_CACHE", None)
