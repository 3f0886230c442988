"""Issue #30: every parser of outside data, fed anything, either returns or raises one of
the tool's typed errors with a one-line message; the CLI, fed hostile files, ends with exit
1 or 2, one error line, no traceback and nothing written outside its folders.

Two halves:

- the causes of tracebacks issue #30 found (a Hub answer nested 100,000 deep, a
  pyproject.toml or build.toml of the wrong shape, a lock that is a FIFO or a link to
  /dev/zero, ``--timeout 1e308``), each run for real through the CLI;
- the property-based harness (hypothesis, derandomized: the same examples on every run):
  generated and mutated inputs for the Hub's JSON answers, S3 XML listings, Simple API
  pages (HTML and JSON), locks, pyproject.toml, build.toml, mirror records and the
  dist-info texts of wheels (RECORD, METADATA, WHEEL), given to the real parser
  functions, and to the CLI where a run is cheap.

Nothing is mocked: each input is real bytes given to the real function or written to a
real file for the real command (servers are real, on 127.0.0.1).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_wheels.errors import KernelWheelsError
from support.helpers import SAMPLE, one_line_error, run_cli
from support.hostile_hub import COMMIT, REPO, VARIANT, Answer, HostileHub, hostile_hub

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
PRECIOUS = b"precious: must never change\n"


@pytest.fixture(scope="module")
def hub() -> Iterator[HostileHub]:
    with hostile_hub() as server:
        yield server


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """The folders a run may write (HF home, tool cache, temp, output), and ``outside/``
    holding a file no run may touch."""
    for name in ("hf", "kw-cache", "tmp", "outside"):
        (tmp_path / name).mkdir()
    (tmp_path / "outside" / "victim").write_bytes(PRECIOUS)
    return tmp_path


def world_env(world: Path, endpoint: str = "http://127.0.0.1:9") -> dict[str, str]:
    return {"HF_ENDPOINT": endpoint, "HF_HOME": str(world / "hf"), "TMPDIR": str(world / "tmp"),
            "KERNEL_WHEELS_CACHE": str(world / "kw-cache"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def nothing_outside(world: Path, *allowed: str) -> None:
    """Only the run's own folders changed; the planted file is as it was; temporary
    folders are gone."""
    victim = world / "outside" / "victim"
    assert not victim.is_symlink() and victim.read_bytes() == PRECIOUS
    assert sorted(p.name for p in (world / "outside").iterdir()) == ["victim"]
    names = {p.name for p in world.iterdir()}
    assert names <= {"hf", "kw-cache", "tmp", "outside", "out", *allowed}, sorted(names)
    assert not list((world / "tmp").iterdir())


# -- issue #30, class 8: the causes of tracebacks, each through the CLI ---------------------
@pytest.mark.parametrize("route", ["refs", "tree:build", f"tree:build/{VARIANT}", "revision"])
def test_a_hub_answer_nested_100000_deep_is_one_line(hub: HostileHub, world: Path, route: str) -> None:
    """Python's JSON parser recurses once per level: a RecursionError, which nothing
    caught, was the traceback."""
    hub.reset()
    hub.override(route, Answer(200, DEEP_JSON, {"Content-Type": "application/json"}))
    where = ["--revision", COMMIT] if route == "revision" else ["1.0.0"]
    proc = run_cli("to-wheel", REPO, *where, "-o", world / "out", "--timeout", "5", "--retries", "0",
                   env=world_env(world, hub.endpoint), check=False)
    one_line_error(proc, status=1)
    nothing_outside(world)


def test_an_org_listing_nested_100000_deep_is_one_line(world: Path) -> None:
    from support.serve_hub import HostileHub as ListingHub

    with ListingHub() as listing:
        listing.rule(r"^GET /api/kernels\?", "raw", status=200, content_type="application/json",
                     body=DEEP_JSON)
        proc = run_cli("mirror", "--org", "org-a", "--to", world / "out", "--retries", "0",
                       env=world_env(world, listing.endpoint), check=False)
    one_line_error(proc, "--org org-a", status=1)
    nothing_outside(world)


LOCK = [{"repo_id": "drbh/img2gray", "sha": "a" * 40, "variants": {}}]


@pytest.mark.parametrize("project", [
    'tool = "x"\n',
    "[tool]\nkernels = 5\n",
    "[tool.kernels]\ndependencies = 5\n",
    '[tool.kernels]\ndependencies = ["drbh/img2gray"]\n',
    "[tool.kernels.dependencies]\n" + '"drbh/img2gray" = 1\n' + "x = " + "[" * 5000 + "]" * 5000 + "\n",
], ids=["tool-string", "kernels-int", "dependencies-int", "dependencies-list", "nested-5000"])
def test_a_pyproject_of_the_wrong_shape_beside_a_lock_is_one_line(world: Path, project: str) -> None:
    folder = world / "project"
    folder.mkdir()
    (folder / "kernels.lock").write_text(json.dumps(LOCK))
    (folder / "pyproject.toml").write_text(project)
    proc = run_cli("to-wheel", "--lock", folder, "-o", world / "out", env=world_env(world), check=False)
    one_line_error(proc, "pyproject.toml", status=1)
    nothing_outside(world, "project")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
@pytest.mark.parametrize("which", ["kernels.lock", "pyproject.toml"])
def test_a_lock_or_project_that_is_no_regular_file_is_one_line(world: Path, kind: str, which: str) -> None:
    """A FIFO hung the run for ever (no writer ever comes); a link to /dev/zero read
    without end."""
    folder = world / "project"
    folder.mkdir()
    (folder / "kernels.lock").write_text(json.dumps(LOCK))
    (folder / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"drbh/img2gray" = 1\n')
    target = folder / which
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.mkdir()
    proc = run_cli("to-wheel", "--lock", folder, "-o", world / "out", env=world_env(world),
                   check=False, timeout=60)
    one_line_error(proc, which, "not a regular file", status=1)
    nothing_outside(world, "project")


def test_a_lock_file_given_itself_as_a_fifo_is_one_line(world: Path) -> None:
    lock = world / "kernels.lock"
    os.mkfifo(lock)
    proc = run_cli("to-wheel", "--lock", lock, "-o", world / "out", env=world_env(world),
                   check=False, timeout=60)
    one_line_error(proc, "kernels.lock", "not a regular file", status=1)
    nothing_outside(world, "kernels.lock")


def _source_tree(world: Path, build_toml: str) -> Path:
    import shutil

    source = world / "src"
    shutil.copytree(SAMPLE, source)
    (source / "build.toml").write_text(build_toml)
    return source


_BUILD_TOML = (SAMPLE / "build.toml").read_text()


@pytest.mark.parametrize("build_toml", [
    _BUILD_TOML + "\n[general.hub]\nrepo-id = " + "[" * 100_000 + "]" * 100_000 + "\n",
    _BUILD_TOML.replace("[torch]\n", '[torch]\nstable-abi = "2.x"\n'),
    _BUILD_TOML.replace('[general]\n', '[general]\nhub = 5\n'),
], ids=["nested-100000", "stable-abi-not-a-version", "hub-not-a-table"])
def test_a_build_toml_of_the_wrong_shape_is_one_line(world: Path, build_toml: str) -> None:
    source = _source_tree(world, build_toml)
    proc = run_cli("build", source, "-o", world / "out", env=world_env(world), check=False)
    one_line_error(proc, "build.toml", status=1)
    assert not (world / "out").exists()
    nothing_outside(world, "src")


_TIMEOUT_CASES = [(command, "1e308") for command in (
    ["versions", "drbh/img2gray"],
    ["to-wheel", "drbh/img2gray", "1.0.0", "-o", "out"],
    ["publish", "x.whl", "--repository-url", "http://127.0.0.1:9/"],
    ["install", "img2gray", "--index-url", "http://127.0.0.1:9/simple"],
)] + [(["install", "img2gray", "--index-url", "http://127.0.0.1:9/simple"], value)
      for value in ("nan", "inf", "-1", "0")]  # to-wheel's: tests/test_to_wheel_options.py


@pytest.mark.parametrize(("command", "value"), _TIMEOUT_CASES,
                         ids=[f"{c[0]}-{v}" for c, v in _TIMEOUT_CASES])
def test_a_timeout_that_is_no_usable_number_of_seconds_is_a_usage_error(world: Path, command: list[str],
                                                                         value: str) -> None:
    """``--timeout 1e308`` passed the check and overflowed the socket's timeout at the
    first connection (OverflowError: timestamp out of range)."""
    no_retries = ["--retries", "0"] if command[0] in ("versions", "to-wheel") else []  # the Hub's
    proc = run_cli(*command, f"--timeout={value}", *no_retries, cwd=world, env=world_env(world), check=False)
    one_line_error(proc, "--timeout", status=2)
    nothing_outside(world)


def test_a_timeout_from_the_environment_is_held_to_the_same_bound(world: Path) -> None:
    proc = run_cli("versions", "drbh/img2gray", "--retries", "0", cwd=world,
                   env={**world_env(world), "KERNEL_WHEELS_TIMEOUT": "1e308"}, check=False)
    one_line_error(proc, "timeout", status=2)


# -- the harness: every parser of outside data, fed generated input --------------------------
T = TypeVar("T")
#: Derandomized: CI runs the same examples every time; a failure is found again by the
#: same run, not by chance. No example database (nothing written beside the tests).
HARNESS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))
FEW = settings(HARNESS, max_examples=12)
#: The CLI examples: a new process each (a second or so on a loaded machine).
CLI = settings(HARNESS, max_examples=5)
CALLS: dict[str, int] = {}


def returns_or_one_line(what: str, call: Callable[[], T]) -> T | None:
    """``call()`` returns, or raises one of the tool's typed errors whose message is one
    non-empty line; any other exception fails the test (hypothesis shows the input)."""
    CALLS[what] = CALLS.get(what, 0) + 1
    try:
        return call()
    except KernelWheelsError as exc:
        assert exc.message.strip(), f"{what}: an empty message"
        assert "\n" not in exc.message and "\r" not in exc.message, f"{what}: {exc.message!r}"
        return None


json_leaves = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
               | st.text(max_size=12) | st.sampled_from(["../../x", "/etc/passwd", "a\x00b", COMMIT,
                                                        "v1.0.0", "build", f"build/{VARIANT}"]))
json_values = st.recursive(json_leaves, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                               ["path", "type", "oid", "size", "lfs", "id", "name", "targetCommit",
                                "tags", "branches", "sha", "files", "filename", "url", "hashes"]),
                               children, max_size=5), max_leaves=16)


def deep(opener: bytes, closer: bytes, depth: int) -> bytes:
    return opener * depth + closer * depth


#: Bodies of a JSON answer: generated JSON, JSON nested past any parser's recursion,
#: truncated JSON, HTML, bytes that are not UTF-8.
json_bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(deep, st.sampled_from([b"[", b'{"a":']), st.sampled_from([b"]", b"}", b""]),
              st.sampled_from([1_000, 100_000])),
    st.sampled_from([b"<html>gateway</html>", b"\xff\xfe\x00", b"", b"null", b"[{}]" * 3]),
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()[:-1]),
)


@pytest.fixture(scope="module")
def hostile_endpoint(hub: HostileHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileHub]:
    """huggingface_hub pointed at the module's hostile Hub, in this process (it reads
    HF_ENDPOINT when it is imported, so its constants are set instead)."""
    from huggingface_hub import constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "ENDPOINT", hub.endpoint)
        patch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                      hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
        patch.setattr(constants, "HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf-cache")))
        patch.setattr(constants, "HF_HUB_OFFLINE", False)
        patch.setenv("HF_TOKEN", "")
        yield hub


def _hub_call(route: str) -> Callable[[], object]:
    from kernel_wheels.kernel.revision import Revision
    from kernel_wheels.kernel.versions import parse_request
    from kernel_wheels.network import NetworkSettings
    from kernel_wheels.sources.hub import HubSource

    source = HubSource(REPO, repo_type="kernel", network=NetworkSettings(timeout=5, retries=0))
    revision = Revision("v1.0.0", "v1.0.0", COMMIT, None)
    return {"refs": source.repository.release_tags,
            "revision": lambda: source.resolve(parse_request(None, COMMIT)),
            "tree:build": lambda: source.variant_names(revision),
            f"tree:build/{VARIANT}": lambda: source.variant_files(revision, VARIANT)}[route]


@HARNESS
@given(route=st.sampled_from(["refs", "revision", "tree:build", f"tree:build/{VARIANT}"]), body=json_bodies,
       status=st.sampled_from([200, 200, 200, 404, 500]))
def test_hub_json_answers(hostile_endpoint: HostileHub, route: str, body: bytes, status: int) -> None:
    """refs, revision (model info) and tree answers, read by huggingface_hub and by the
    tool's own pages reader, through the real HubSource over HTTP on 127.0.0.1."""
    hostile_endpoint.reset()
    hostile_endpoint.override(route, Answer(status, body, {"Content-Type": "application/json"}))
    returns_or_one_line(f"hub {route}", _hub_call(route))


@HARNESS
@given(page=json_values, folder=st.sampled_from(["", "build", f"build/{VARIANT}"]))
def test_hub_tree_pages_checked_field_by_field(page: Any, folder: str) -> None:
    from kernel_wheels.hub import answers

    where = f"{REPO} at {COMMIT[:12]}"
    returns_or_one_line("tree page", lambda: answers.folder_names(
        [answers.tree_page(page, where)], folder, where))
    returns_or_one_line("tree files", lambda: answers.remote_files(
        [answers.tree_page(page, where)], folder, where))


@FEW
@given(body=json_bodies, kind=st.sampled_from(["kernels", "models"]))
def test_hub_org_listings(body: bytes, kind: str) -> None:
    """``mirror --org``'s author listings, through organisation_repos over HTTP."""
    from huggingface_hub import constants

    from kernel_wheels.hub.client import open_client
    from kernel_wheels.hub.listing import organisation_repos
    from kernel_wheels.network import NetworkSettings
    from support.serve_hub import HostileHub as ListingHub

    with ListingHub() as listing, pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "ENDPOINT", listing.endpoint)
        patch.setenv("HF_TOKEN", "")
        listing.rule(rf"^GET /api/{kind}\?", "raw", status=200, content_type="application/json", body=body)
        returns_or_one_line("org listing", lambda: organisation_repos(
            open_client(NetworkSettings(timeout=5, retries=0)), "org-a"))


# -- index pages (PEP 503 HTML, PEP 691 JSON), over HTTP and from a file:// index ---------------
html_fragments = st.sampled_from([
    '<a href="{u}">x</a>', '<a href="{u}#sha256={h}" data-requires-python="{t}">f</a>',
    '<base href="{u}">', '<a href="{u}" data-yanked="{t}" data-core-metadata="sha256={h}">',
    "<a>", "<a href>", "</a></a>", "<!--", "<![CDATA[", "&#x0;&#99999999;", "<a href='{u}'",
])
hostile_urls = st.sampled_from([
    "k-1.0-py3-none-any.whl", "http://[::1", "http://[zz]/x.whl", "//elsewhere/x.whl", "file:///etc/passwd",
    "javascript:alert(1)", "../../../x.whl", "http://user:pw@h/x.whl", "\x00", "%00%2F..", "", "#",
    "http://h:99999999/x.whl", "k-1.0-py3-none-any.whl#sha256=zz",
]) | st.text(max_size=20)
html_pages = st.lists(st.tuples(html_fragments, hostile_urls, st.text(alphabet="0123456789abcdef", max_size=64),
                                st.text(max_size=10)), max_size=6).map(
    lambda parts: "".join(f.replace("{u}", u).replace("{h}", h).replace("{t}", t) for f, u, h, t in parts))
#: What an index says a file's binaries hold (install chooses by it; #38 added code_objects).
gpu_codes = st.dictionaries(
    st.sampled_from(["cubins", "ptx", "code_objects", "binaries"]),
    json_leaves | st.lists(st.sampled_from(["sm_90", "compute_90a", "gfx942", "gfx942:sramecc+:xnack-",
                                            "gfx942:xnack+:xnack-", "gfx9-4-generic", "gfx"])
                           | st.text(max_size=12), max_size=70), max_size=4)
json_pages = st.one_of(
    json_values.map(json.dumps),
    st.lists(st.dictionaries(st.sampled_from(["filename", "url", "hashes", "yanked", "requires-python",
                                              "core-metadata", "kernel-wheels-gpu-code"]),
                             json_leaves | hostile_urls | gpu_codes, max_size=6),
             max_size=4).map(lambda files: json.dumps({"meta": {"api-version": "1.1"}, "name": "k",
                                                       "files": files})),
    st.builds(lambda n: '{"files": ' + "[" * n + "]" * n + "}", st.sampled_from([1_000, 100_000])))


@pytest.fixture(scope="module")
def index_server() -> Iterator[HostileHub]:
    """A loopback server answering whatever page a test sets (the hostile Hub's file
    route does: ``/<org>/<name>/resolve/<rev>/<path>``)."""
    with hostile_hub() as server:
        yield server


@HARNESS
@given(page=st.one_of(html_pages.map(lambda t: ("text/html", t)),
                      json_pages.map(lambda t: ("application/vnd.pypi.simple.v1+json", t))))
def test_index_pages_over_http(index_server: HostileHub, page: tuple[str, str]) -> None:
    from kernel_wheels.remote.simple_client import SimpleClient

    content_type, text = page
    index_server.reset()
    index_server.override("file:simple/k/", Answer(200, text.encode("utf-8", "surrogatepass"),
                                                     {"Content-Type": content_type}))
    base = f"{index_server.endpoint}/{REPO}/resolve/{COMMIT}/simple/"
    with SimpleClient(base, timeout=5) as client:
        returns_or_one_line("index page", lambda: client.project_files("k"))


@HARNESS
@given(page=html_pages)
def test_index_pages_from_a_file_index_and_find_links(tmp_path_factory: pytest.TempPathFactory,
                                                      page: str) -> None:
    from kernel_wheels.remote.simple_client import SimpleClient

    root = tmp_path_factory.mktemp("file-index")
    (root / "k").mkdir()
    (root / "index.html").write_text("<a href='k/'>k</a>")
    (root / "k" / "index.html").write_text(page, encoding="utf-8", errors="surrogatepass")
    with SimpleClient(root.as_uri() + "/", timeout=5) as client:
        returns_or_one_line("file index page", lambda: client.project_files("k"))


# -- locks and the project beside them -----------------------------------------------------
def toml_value(value: Any) -> str:
    """A TOML spelling of a JSON value (None has none: a string instead)."""
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if abs(value) < 2**63 else json.dumps(str(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def _nested_depends(depth: int) -> bytes:
    """A lock whose kernel_depends hold kernel_depends, ``depth`` deep (as text: json
    itself cannot write it)."""
    leaf = json.dumps({"repo_id": "a/b", "sha": COMMIT})
    head = leaf[:-1] + ', "kernel_depends": {"a/b": '
    return ("[" + head * depth + leaf + "}}" * depth + "]").encode()


lock_entries = st.one_of(
    json_values,
    st.fixed_dictionaries({"repo_id": st.sampled_from(["drbh/img2gray", "a/b", "../x", "x"]) | json_leaves,
                           "sha": st.sampled_from([COMMIT, "a" * 40]) | json_leaves},
                          optional={"variants": st.dictionaries(st.sampled_from([VARIANT, "..", "a/b", ""]),
                                                                json_values, max_size=2) | json_leaves,
                                    "kernel_depends": json_values}),
    st.fixed_dictionaries({"dependency": st.fixed_dictionaries({"repo-id": json_leaves, "version": json_leaves}),
                           "lock": st.fixed_dictionaries({"commit": json_leaves})}),
)
lock_bodies = st.one_of(
    st.lists(lock_entries, max_size=3).map(lambda v: json.dumps(v).encode()),
    json_bodies,
    st.integers(1, 2000).map(_nested_depends),
)


project_texts = st.one_of(
    st.dictionaries(st.sampled_from(["tool", "project", "x"]), json_values, max_size=3).map(
        lambda doc: "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items())),
    st.fixed_dictionaries({"kernels": json_values}).map(
        lambda t: f"[tool]\nkernels = {toml_value(t['kernels'])}\n"),
    st.dictionaries(st.sampled_from(["drbh/img2gray", "a/b", "x"]), json_values, max_size=3).map(
        lambda deps: "[tool.kernels.dependencies]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n"
                                                                 for k, v in deps.items())),
    st.sampled_from(['tool = "x"', "[tool]\nkernels = 5", "\x00", "[[tool]]\n[[tool]]"]),
    st.builds(lambda n: "x = " + "[" * n + "]" * n, st.sampled_from([1_000, 100_000])),
    st.text(max_size=40),
)


@HARNESS
@given(lock=lock_bodies, project=project_texts | st.none())
def test_locks_and_their_project(tmp_path_factory: pytest.TempPathFactory, lock: bytes,
                                 project: str | None) -> None:
    from kernel_wheels.locked.lockfile import read_lock

    folder = tmp_path_factory.mktemp("project")
    (folder / "kernels.lock").write_bytes(lock)
    if project is not None:
        (folder / "pyproject.toml").write_text(project, encoding="utf-8", errors="surrogatepass")
    returns_or_one_line("lock", lambda: read_lock(folder / "kernels.lock"))
    returns_or_one_line("lock and project", lambda: read_lock(folder))


# -- build.toml: the sample kernel's, one value replaced or one key added --------------------
_BUILD_KEYS = [("general", k) for k in ("name", "version", "license", "backends", "edition", "hub",
                                        "python-depends", "kernel-depends", "cuda", "upstream")] + \
    [("torch", k) for k in ("src", "include", "pyext", "cxx-flags", "minver", "maxver", "stable-abi")] + \
    [("kernel.img2gray", k) for k in ("backend", "depends", "src", "include", "cuda-capabilities",
                                      "cuda-flags", "rocm-archs", "cuda-minver")]


def _build_toml(table: str, key: str, value: str) -> str:
    lines = _BUILD_TOML.splitlines()
    out: list[str] = []
    current, skipping = None, False
    for line in lines:
        if line.startswith("["):
            current, skipping = line.strip("[]"), False
            out.append(line)
            if current == table:
                out.append(f"{key} = {value}")
            continue
        if skipping and (line.startswith(" ") or line.startswith("]")):
            continue
        skipping = False
        if current == table and line.split("=")[0].strip() == key:
            skipping = line.rstrip().endswith("[")  # the value goes on over several lines
            continue
        out.append(line)
    return "\n".join(out) + "\n"


build_tomls = st.one_of(
    st.tuples(st.sampled_from(_BUILD_KEYS), json_values.map(toml_value)).map(
        lambda t: _build_toml(t[0][0], t[0][1], t[1])),
    st.tuples(st.sampled_from(_BUILD_KEYS), st.sampled_from([
        '"2.x"', '"\\u0000"', "[[]]", '{cuda = ["2.11"]}', '{cuda = "2.x"}', "-1", "1e999"])
        | st.builds(lambda n: "[" * n + "]" * n, st.sampled_from([1_000, 100_000]))
        | st.builds(lambda n: "{a = " * n + "1" + "}" * n, st.sampled_from([1_000, 5_000]))
        | st.builds(lambda n: '"' + "x" * n + '"', st.sampled_from([100_000]))).map(
        lambda t: _build_toml(t[0][0], t[0][1], t[1])),
    st.text(max_size=60),
)


@HARNESS
@given(text=build_tomls)
def test_build_toml(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    from kernel_wheels.building.config import read_build_toml

    source = tmp_path_factory.mktemp("source")
    for part in ("csrc", "torch-ext"):
        (source / part).symlink_to(SAMPLE / part)
    (source / "build.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    returns_or_one_line("build.toml", lambda: read_build_toml(source))


# -- mirror records: state, pending and pages records in a folder destination ----------------
record_fields = st.fixed_dictionaries({
    "repo": st.sampled_from(["org/k", "../x", "a"]) | json_leaves, "version": st.sampled_from(["1.0.0", ".."]),
    "tag": st.just("v1.0.0"), "commit": st.sampled_from([COMMIT, "x"]), "variant": st.just(VARIANT),
    "wheel": st.sampled_from(["k-1.0.0-py3-none-any.whl", "../../x.whl"]), "project": json_leaves,
    "sha256": st.sampled_from(["0" * 64, "x"]), "size": json_leaves, "requires_python": json_leaves,
    "metadata_sha256": json_leaves}, optional={"yanked": json_leaves, "extra": json_leaves})
record_bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.lists(record_fields | json_values, max_size=3).map(
        lambda records: json.dumps({"format": 1, "repo": "org/k", "records": records}).encode()),
    record_fields.map(lambda r: json.dumps(r).encode()),
    st.fixed_dictionaries({"format": st.just(1), "targets": json_values, "indexes": json_values,
                           "owners": json_values}).map(lambda r: json.dumps(r).encode()),
)


def _mirror_records(tmp_path_factory: pytest.TempPathFactory, body: bytes) -> None:
    from kernel_wheels.mirror import state
    from kernel_wheels.mirror.store import FolderDestination

    root = tmp_path_factory.mktemp("dest")
    store = FolderDestination(root)
    pending = f"{state.PENDING}/org/k/1.0.0/{VARIANT}@{COMMIT}.json"
    for key in (state.state_key("org/k"), pending, state.PAGES):
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    returns_or_one_line("state record", lambda: state.load_state(store, "org/k"))
    returns_or_one_line("pending record", lambda: state.load_pending(store, [pending]))
    returns_or_one_line("pages record", lambda: state.PagesRecord.load(store))


@HARNESS
@given(body=record_bodies)
def test_mirror_records(tmp_path_factory: pytest.TempPathFactory, body: bytes) -> None:
    _mirror_records(tmp_path_factory, body)


@FEW
@given(opener=st.sampled_from([b"[", b'{"a":']), closer=st.sampled_from([b"]", b"}"]))
def test_mirror_records_nested_100000_deep(tmp_path_factory: pytest.TempPathFactory, opener: bytes,
                                           closer: bytes) -> None:
    _mirror_records(tmp_path_factory, deep(opener, closer, 100_000))


# -- S3 XML listings: the mirror's S3 destination lists keys through botocore's XML parser -----
xml_names = st.sampled_from(["Contents", "Key", "IsTruncated", "NextContinuationToken", "KeyCount",
                             "CommonPrefixes", "Prefix", "Size", "ETag", "Error", "Code"]) | st.text(
    alphabet="abcXYZ:_-", min_size=1, max_size=8)
xml_texts = st.sampled_from(["true", "false", "", "../../x", "state/org/k.json", "\u0000", "&amp;", "&bogus;",
                             "]]>", "1e999", "-1"]) | st.text(max_size=12)
xml_elements = st.recursive(
    st.tuples(xml_names, xml_texts).map(lambda t: f"<{t[0]}>{_xml_escape(t[1])}</{t[0]}>"),
    lambda children: st.tuples(xml_names, st.lists(children, max_size=4)).map(
        lambda t: f"<{t[0]}>{''.join(t[1])}</{t[0]}>"), max_leaves=12)


def _xml_escape(text: str) -> str:
    return text if text in ("&amp;", "&bogus;", "]]>") else \
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


s3_bodies = st.one_of(
    st.lists(xml_elements, max_size=5).map(
        lambda items: ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                       'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>'
                       + "".join(items) + "</ListBucketResult>").encode()),
    st.builds(lambda n: ("<ListBucketResult>" + "<Contents>" * n + "</Contents>" * n
                         + "</ListBucketResult>").encode(), st.sampled_from([1_000, 100_000])),
    st.binary(max_size=64), st.just(b"<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'aaaa'>]><x>&a;</x>"),
)


@pytest.fixture(scope="module")
def s3_answers() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server answering every request with the body the test puts in the list."""
    from http.server import BaseHTTPRequestHandler

    from support.http_server import LoopbackServer

    body = [b""]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body[0])))
            self.end_headers()
            self.wfile.write(body[0])

        def log_message(self, *args: object) -> None:
            pass

    with LoopbackServer(Handler) as server:
        yield server.endpoint, body


@HARNESS
@given(body=s3_bodies)
def test_s3_xml_listings(s3_answers: tuple[str, list[bytes]], body: bytes) -> None:
    """What an S3-compatible store answers to ListObjectsV2, read by the mirror's
    destination (``S3Destination.keys``, botocore's parser behind it)."""
    import boto3
    from botocore.config import Config

    from kernel_wheels.mirror.store import S3Destination

    endpoint, answer = s3_answers
    answer[0] = body
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing",
                          config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=5))
    returns_or_one_line("s3 listing", lambda: list(S3Destination("bucket", "k", client).keys("state/")))


# -- a static site's own records (index, yank): state and yanks -------------------------------
site_bodies = st.one_of(
    json_bodies,
    st.fixed_dictionaries({"format": st.integers(0, 3), "renderer": json_leaves, "targets": json_values,
                           "wheels": st.dictionaries(st.sampled_from(["k-1-py3-none-any.whl",
                                                                      "../x.whl"]), json_values, max_size=2),
                           "inputs": json_values, "projects": json_values}).map(lambda v: json.dumps(v).encode()),
    st.dictionaries(json_leaves.map(str), st.dictionaries(st.text(max_size=6), json_leaves, max_size=2),
                    max_size=3).map(lambda v: json.dumps(v).encode()),
)


@HARNESS
@given(body=site_bodies)
def test_site_records(tmp_path_factory: pytest.TempPathFactory, body: bytes) -> None:
    """index reads its state (a damaged one is rebuilt) and yank and index the yanks (a
    damaged one is an error): either way, one line or a value."""
    from kernel_wheels.site.state import SiteState
    from kernel_wheels.site.yanks import load_yanks

    state_dir = tmp_path_factory.mktemp("site") / ".kernel-wheels"
    state_dir.mkdir()
    (state_dir / "state.json").write_bytes(body)
    (state_dir / "yanks.json").write_bytes(body)
    returns_or_one_line("site state", lambda: SiteState.load(state_dir / "state.json"))
    returns_or_one_line("site yanks", lambda: load_yanks(state_dir))


# -- dist-info records of a wheel: RECORD, METADATA, WHEEL -----------------------------------
WHEEL_NAME = "k-1.0.0-py3-none-any.whl"
dist_texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.tuples(st.sampled_from(["k/__init__.py", "../x", "/abs", "k-1.0.0.dist-info/RECORD", "a\x00",
                                        "k/\n", '"']),
                       st.sampled_from(["sha256=" + "A" * 43, "sha256=", "md5=x", "", "sha256=!!", "sha256"]),
                       st.sampled_from(["0", "-1", "x", "", "99999999999999999999"])), max_size=5).map(
        lambda rows: "".join(f"{a},{b},{c}\n" for a, b, c in rows)),
    st.sampled_from(["Metadata-Version: 2.4\nName: k\nVersion: 1.0.0\nRequires-Dist: [\n",
                     "Requires-Dist: torch; python_version >\n", "Wheel-Version: 9.0\n", "\udcff"])
    | st.builds(lambda n: "Name: " + "a" * n + "\n" + '"' * 1000 + "\n" + "x," * n, st.sampled_from([10_000])),
)


def _wheel_with(record: str, metadata: str, wheel: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("k/__init__.py", "VALUE = 1\n")
        for name, text in (("RECORD", record), ("METADATA", metadata), ("WHEEL", wheel)):
            zf.writestr(f"k-1.0.0.dist-info/{name}", text.encode("utf-8", "surrogatepass"))
    return buffer.getvalue()


@HARNESS
@given(record=dist_texts, metadata=dist_texts, wheel=dist_texts)
def test_dist_info_records(tmp_path_factory: pytest.TempPathFactory, record: str, metadata: str,
                           wheel: str) -> None:
    """check's reader (checks/), index's facts (index/wheelfacts) and install's
    Requires-Dist (install/core): ``check_wheel`` returns a report whatever the wheel
    holds; the others return or raise a typed one-line error."""
    from kernel_wheels.checks import CheckReport
    from kernel_wheels.checks import judge_wheel as check_wheel
    from kernel_wheels.index.wheelfacts import inspect_wheel
    from kernel_wheels.install.core import wheel_dependencies

    path = tmp_path_factory.mktemp("wheel") / WHEEL_NAME
    path.write_bytes(_wheel_with(record, metadata, wheel))
    assert isinstance(check_wheel(path), CheckReport)
    returns_or_one_line("wheel facts", lambda: inspect_wheel(path))
    returns_or_one_line("wheel dependencies", lambda: wheel_dependencies(path))


# -- what a target Python answers: install's and local-kernels' probes ------------------------
installed_rows = st.lists(st.fixed_dictionaries(
    {"name": json_leaves, "version": json_leaves, "root": st.sampled_from(["/", "/nonexistent", "\x00"]) | json_leaves,
     "record": json_values | st.fixed_dictionaries(
         {"wheel_layout": st.sampled_from([2, 1, "2"]),
          "variant_folder": st.sampled_from(["k/x", "../../etc", "/etc", "", "a\x00b"]) | json_leaves,
          "source": st.sampled_from(["https://huggingface.co/org/k", "https://evil/x"]) | json_leaves,
          "variant": json_values, "commit": json_leaves})}), max_size=4)
probe_answers = st.one_of(installed_rows.map(json.dumps), json_values.map(json.dumps),
                          st.builds(lambda n: "[" * n + "]" * n, st.sampled_from([1_000, 100_000])),
                          st.text(max_size=40))


@HARNESS
@given(answer=probe_answers)
def test_a_target_pythons_answers(tmp_path_factory: pytest.TempPathFactory, answer: str) -> None:
    """local-kernels (and install) run a probe in the target Python and read its last
    line as JSON: a target that answers anything (a real process: a script standing in
    for the Python) gives a list or one typed line."""
    from kernel_wheels.install.installed import installed_kernels

    folder = tmp_path_factory.mktemp("target")
    (folder / "answer").write_text(answer, encoding="utf-8", errors="surrogatepass")
    python = folder / "python"
    python.write_text(f"#!/bin/sh\nexec cat {folder / 'answer'}\n")
    python.chmod(0o755)
    returns_or_one_line("target python", lambda: installed_kernels(python, timeout=60))


# -- the CLI on generated files: exit 1 or 2, one line, nothing outside its folders ----------
@CLI
@given(lock=lock_bodies, project=project_texts)
def test_cli_to_wheel_lock_on_generated_files(lock: bytes, project: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kw-harness-") as temp:
        world = Path(temp)
        for name in ("hf", "kw-cache", "tmp", "outside", "project"):
            (world / name).mkdir()
        (world / "outside" / "victim").write_bytes(PRECIOUS)
        (world / "project" / "kernels.lock").write_bytes(lock)
        (world / "project" / "pyproject.toml").write_text(project, encoding="utf-8", errors="surrogatepass")
        proc = run_cli("to-wheel", "--lock", world / "project", "-o", world / "out", "--retries", "0",
                       "--timeout", "2", env=world_env(world), check=False, timeout=120)
        one_line_error(proc)
        assert proc.returncode in (1, 2)
        nothing_outside(world, "project")


@CLI
@given(record=dist_texts, metadata=dist_texts, wheel=dist_texts)
def test_cli_check_and_index_on_generated_wheels(record: str, metadata: str, wheel: str) -> None:
    """check reports (exit 0 or 1, a verdict line, no traceback); index refuses a wheel
    that fails with one error line and leaves no site behind."""
    with tempfile.TemporaryDirectory(prefix="kw-harness-") as temp:
        world = Path(temp)
        for name in ("hf", "kw-cache", "tmp", "outside", "wheels"):
            (world / name).mkdir()
        (world / "outside" / "victim").write_bytes(PRECIOUS)
        (world / "wheels" / WHEEL_NAME).write_bytes(_wheel_with(record, metadata, wheel))
        checked = run_cli("check", world / "wheels" / WHEEL_NAME, env=world_env(world), check=False)
        assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
        indexed = run_cli("index", world / "wheels", "-o", world / "out", env=world_env(world), check=False)
        if indexed.returncode != 0:
            one_line_error(indexed)
            assert indexed.returncode in (1, 2)
            assert not (world / "out" / "simple").exists()
        nothing_outside(world, "wheels")


@CLI
@given(text=build_tomls)
def test_cli_build_on_generated_build_toml(text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kw-harness-") as temp:
        world = Path(temp)
        for name in ("hf", "kw-cache", "tmp", "outside", "src"):
            (world / name).mkdir()
        (world / "outside" / "victim").write_bytes(PRECIOUS)
        # No sources beside it: a build.toml that passes every check still fails at
        # "names csrc/..., which does not exist", before anything is compiled.
        (world / "src" / "build.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
        proc = run_cli("build", world / "src", "-o", world / "out", env=world_env(world), check=False,
                       timeout=300)
        one_line_error(proc)
        assert proc.returncode in (1, 2)
        assert not (world / "out" / "build").exists() or not any((world / "out" / "build").iterdir())
        nothing_outside(world, "src")


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"hostile-input harness calls: {CALLS}")


# -- the suite-wide guards can fail ----------------------------------------------------------
def test_a_printed_canary_fails_the_run(world: Path) -> None:
    """run_cli is the funnel of every CLI test: a canary value in the output fails it (here
    the tool echoes its argument back in its error line, as it should for a folder name)."""
    from support.helpers import CANARIES

    with pytest.raises(AssertionError, match="the value of KW_CANARY_SECRET was printed"):
        run_cli("to-wheel", CANARIES["KW_CANARY_SECRET"], "1.0.0", "-o", world / "out", check=False)


def test_a_canary_in_a_childs_argv_fails_the_run(world: Path) -> None:
    """The audit hook sees the argv of every child: here install starts the target Python
    at a path holding a canary (the path is the test's, a secret in argv all the same)."""
    from support.helpers import CANARIES

    folder = world / CANARIES["KW_CANARY_SECRET"]
    folder.mkdir()
    python = folder / "python"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    with pytest.raises(AssertionError, match="a secret in the argv of"):
        run_cli("install", "img2gray", "--python", python, "--index-url", "http://127.0.0.1:9/simple",
                cwd=world, env={"KW_CANARY_SECRET": CANARIES["KW_CANARY_SECRET"]}, check=False)


def test_the_canaries_reach_the_tool(world: Path) -> None:
    """Set in every run unless the test gives its own: a child of the tool that prints its
    environment shows them (so a leak would be seen)."""
    from support.helpers import CANARIES, cli_secrets

    assert set(cli_secrets({**CANARIES})) == set(CANARIES.values())
    assert cli_secrets({"HF_TOKEN": "short"}) == []  # "p", "x": too common to look for
    assert cli_secrets({"TWINE_PASSWORD": "s3cr3t-value"}) == ["s3cr3t-value"]


@pytest.mark.parametrize("name", ["yanks.json", "state.json"])
def test_a_site_record_that_is_no_regular_file_is_not_waited_on(world: Path, name: str) -> None:
    """index read the site's records as they were: a FIFO in their place hung it for ever.
    A yanks file that cannot be read stops the run (un-yanking silently would undo a
    decision); a state that cannot be read is rebuilt from the site's files."""
    site = world / "out"
    (site / ".kernel-wheels").mkdir(parents=True)
    os.mkfifo(site / ".kernel-wheels" / name)
    (world / "wheels").mkdir()
    proc = run_cli("index", world / "wheels", "-o", site, env=world_env(world), check=False, timeout=60)
    if name == "yanks.json":
        one_line_error(proc, "yanks.json", "not a regular file", status=2)
    else:
        assert proc.returncode == 0, proc.stderr
        assert (site / ".kernel-wheels" / "state.json").is_file()
    nothing_outside(world, "wheels")


def test_a_kernels_file_that_is_no_regular_file_is_a_usage_error(world: Path) -> None:
    os.mkfifo(world / "kernels.txt")
    proc = run_cli("serve", "--kernels-file", world / "kernels.txt", "--port", "0", env=world_env(world),
                   check=False, timeout=60)
    one_line_error(proc, "--kernels-file", "not a regular file", status=2)


def test_a_compiler_never_sees_a_canary(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit hook checks the environment of every compiler the build starts: a source
    that stops the compiler at its first line keeps this fast."""
    import shutil

    import support.helpers

    assert support.helpers.CHECK_COMPILER_ENV
    source = world / "src"
    shutil.copytree(SAMPLE, source)
    (source / "csrc" / "img2gray_cpu.cpp").write_text("#error the test stops the compiler here\n")
    proc = run_cli("build", source, "-o", world / "out", "--backend", "cpu", env=world_env(world), check=False)
    one_line_error(proc)


def test_the_guards_fail_a_test_whose_run_writes_into_home(pytester: pytest.Pytester) -> None:
    """The suite's own fixture (tests/conftest.py), in a pytest run of its own: a test
    whose CLI run writes into its HOME fails (in teardown), one that writes into its
    output folder passes."""
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_inner="""
import os
from pathlib import Path

from support.helpers import run_cli

def test_into_home(tmp_path):
    run_cli("index", "-o", Path(os.environ["KW_TEST_HOME"]) / "site")

def test_into_its_folder(tmp_path):
    run_cli("index", "-o", tmp_path / "site")
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*written into HOME (outside the tool's folders): ['site'*"])


def test_a_metadata_json_beyond_the_size_bound_is_refused(world: Path, cpu_build: Path) -> None:
    """metadata.json is read like every other file of outside data: a regular file of at
    most 16 MB (it was read whole, whatever its size)."""
    import shutil

    variant = world / "source" / "build" / cpu_build.name
    shutil.copytree(cpu_build, variant)
    (variant / "metadata.json").write_bytes(b'{"name": "img2gray"' + b" " * (17 << 20) + b"}")
    proc = run_cli("to-wheel", world / "source", "1.0.0", "-o", world / "out", env=world_env(world),
                   check=False)
    one_line_error(proc, "metadata.json", "more than the 16777216 bytes", status=1)
    assert not (world / "out").exists() or not list((world / "out").glob("*.whl"))


# -- issue #39: the numbered cases, each through the CLI or the real store ------------------------
#: What a terminal acts on: none of it may reach the screen raw.
_RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\u2066", "\u2069")


def _user_file(world: Path, kind: str) -> Path:
    """A file the user names that is no file to read: a FIFO nobody writes (the read
    waited for ever), /dev/zero (it never ends: a MemoryError), a folder."""
    if kind == "dev-zero":
        return Path("/dev/zero")
    path = world / f"named-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
@pytest.mark.parametrize("option", ["check --policy", "verify --policy", "verify --trusted-root",
                                    "install -r", "install -r (included)"])
def test_a_user_named_file_that_is_no_regular_file_is_one_line(world: Path, option: str, kind: str) -> None:
    """Point 1: ``--policy /dev/zero`` and ``install -r /dev/zero`` ended in a MemoryError
    traceback, a FIFO hung them until killed, ``--trusted-root FIFO`` said "no such file"."""
    named = _user_file(world, kind)
    wheel = world / "x.whl"
    wheel.write_bytes(b"")  # the wheels are looked at first: one exists
    if option == "install -r (included)":
        requirements = world / "requirements.txt"
        requirements.write_text(f"-r {named}\n")
        args = ["install", "-r", requirements]
    elif option.startswith("install"):
        args = ["install", "-r", named]
    else:
        command, flag = option.split()
        args = [command, flag, named, wheel]
    proc = run_cli(*args, env=world_env(world), check=False)
    shown_kind = {"fifo": "a FIFO", "dev-zero": "a device", "folder": "a folder"}[kind]
    expected = f"{shown_kind}, not a regular file" if option == "verify --trusted-root" \
        else "is not a regular file (a FIFO, a device, a socket or a folder); refusing to read it"
    one_line_error(proc, str(named), expected, status=2)
    nothing_outside(world, "x.whl", "requirements.txt", f"named-{kind}")


@pytest.mark.parametrize("policy", [
    "signers = " + "[" * 5000 + "]" * 5000 + "\n",
    "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
    "[" + ".".join(["t"] * 5000) + "]\n",
], ids=["arrays-5000", "inline-tables-5000", "dotted-table-5000"])
def test_a_policy_file_nested_5000_deep_is_one_line(world: Path, policy: str) -> None:
    """Point 1: tomllib recursed 5,000 deep, a RecursionError traceback; a table header of
    5,000 parts makes tomllib check every prefix of it (100,000 parts: more memory than the
    machine had)."""
    (world / "policy.toml").write_text(policy)
    (world / "x.whl").write_bytes(b"")
    proc = run_cli("check", "--policy", world / "policy.toml", world / "x.whl", env=world_env(world), check=False)
    one_line_error(proc, "the policy file", "nested too deeply", status=2)


@pytest.mark.parametrize("line", ["img2gray @ http://u:PASSWORD@host/x.whl",
                                  "img2gray --index-url http://u:PASSWORD@host/simple",
                                  "img2gray==1.0 --extra-index-url=https://PASSWORD@host/simple"])
def test_a_requirement_line_with_a_password_is_refused_without_it(world: Path, line: str) -> None:
    """Point 3: the refusal repeated the whole line, password included."""
    (world / "requirements.txt").write_text(f"# kernels\n{line}\n")
    proc = run_cli("install", "-r", world / "requirements.txt", env=world_env(world), check=False)
    error = one_line_error(proc, "requirements.txt:2", "is a URL or path", status=2)
    assert "PASSWORD" not in proc.stdout + proc.stderr
    assert "://***@host" in error, error


@pytest.mark.parametrize("given", ["file", "argument"])
def test_a_requirement_with_terminal_controls_is_shown_escaped(world: Path, given: str) -> None:
    """Point 2: a requirement holding ESC and BEL was echoed raw (twice) in install's
    parse error: an OSC title sequence reached the terminal."""
    requirement = "img2\x1b]0;pwned\x07gray\u202e==1"
    if given == "file":
        (world / "requirements.txt").write_text(requirement + "\n")
        args: list[Any] = ["install", "-r", world / "requirements.txt"]
    else:
        args = ["install", requirement]
    proc = run_cli(*args, env=world_env(world), check=False)
    error = one_line_error(proc, "is not a requirement", status=2)
    assert not any(c in proc.stdout + proc.stderr for c in _RAW_CONTROLS), repr(proc.stderr)
    assert "img2\\x1b]0;pwned\\x07gray\\u202e==1" in error, error


def _with_verified_record(wheel: Path, target: Path, kernel: str) -> Path:
    """``wheel`` copied to ``target`` with its kernel_wheels.verified.json naming ``kernel``
    (and RECORD saying so: the record is what the wheel holds, only its words are hostile)."""
    import base64
    import hashlib

    with zipfile.ZipFile(wheel) as source:
        members = {info.filename: (info, source.read(info)) for info in source.infolist()}
    name = next(n for n in members if n.endswith("/kernel_wheels.verified.json"))
    record = json.loads(members[name][1])
    record["kernel"] = kernel
    data = json.dumps(record).encode()
    members[name] = (members[name][0], data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record_name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    lines = [f"{name},sha256={digest},{len(data)}" if line.startswith(name + ",") else line
             for line in members[record_name][1].decode().splitlines()]
    members[record_name] = (members[record_name][0], ("\n".join(lines) + "\n").encode())
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info, content in members.values():
            out.writestr(info, content)
    return target


@pytest.mark.parametrize("how", [["check", "-v"], ["check", "--require-signature"]])
def test_a_verified_record_with_terminal_controls_is_shown_escaped(wheels: Path, world: Path,
                                                                   how: list[str]) -> None:
    """Point 2: a kernel_wheels.verified.json whose ``kernel`` holds an OSC title
    sequence, a clear-screen and a bidi override was printed raw by ``check -v`` and
    ``check --require-signature``."""
    original = next(p for p in sorted(wheels.glob("*.whl"))
                    if "kernel_wheels.verified.json" in str(zipfile.ZipFile(p).namelist()))
    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[Hgood\u202egpj.exe\r\n"
    wheel = _with_verified_record(original, world / original.name, hostile)
    proc = run_cli(*how, wheel, env=world_env(world), check=False)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output
    assert not any(c in output for c in _RAW_CONTROLS), repr(output)
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x1b[Hgood\\u202egpj.exe" in output, output


class _EndlessS3:
    """An S3 endpoint on 127.0.0.1 that answers every ListObjectsV2 as truncated, with a
    NEW continuation token each time (the listing #30 bounded by tokens seen before went
    on: 1,283 requests a minute, for ever)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler

        from support.http_server import LoopbackServer

        self.listings = 0
        endless = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                endless.listings += 1
                token = f"t{endless.listings}"
                body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                        'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>pre/</Prefix>'
                        '<KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>'
                        f'<Contents><Key>pre/k-{token}</Key><Size>1</Size></Contents>'
                        f'<NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = LoopbackServer(Handler)


def test_an_s3_listing_that_always_names_a_new_page_ends_at_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point 4, counted in requests: the listing ends after its page bound (1,000), with
    one line, instead of running for ever."""
    from kernel_wheels.errors import DistributionError
    from kernel_wheels.mirror.store import MAX_LIST_PAGES, open_destination

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "s3-secret-canary-39",
                        "AWS_DEFAULT_REGION": "us-east-1", "KERNEL_WHEELS_TIMEOUT": "5",
                        "KERNEL_WHEELS_RETRIES": "0"}.items():
        monkeypatch.setenv(name, value)
    endless = _EndlessS3()
    with endless.server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endless.server.endpoint)
        store = open_destination("s3://bkt/pre")
        with pytest.raises(DistributionError) as raised:
            for _key in store.keys(""):
                pass
    assert raised.value.message == f"s3://bkt/pre: listing / goes on for more than {MAX_LIST_PAGES} pages; " \
                                   "refusing to read more of it"
    assert endless.listings == MAX_LIST_PAGES == 1000


def test_uploads_to_an_index_server_take_the_runs_timeout(world: Path) -> None:
    """Point 4's stall message: a mirror to an index server took the index default (60 s)
    whatever --timeout said, and a stalled server's line named 60 s under --timeout 10."""
    from kernel_wheels.mirror.pipeline import MirrorOptions, open_target
    from kernel_wheels.network import NetworkSettings

    _store, uploads = open_target("http://127.0.0.1:9/", str(world / "state"), MirrorOptions(),
                                  NetworkSettings(timeout=10), prompt=False)
    assert uploads is not None and uploads.timeout == 10  # type: ignore[attr-defined]


# -- the harness over user-named files: policy files and requirements files ---------------------
policy_texts = st.one_of(
    st.dictionaries(st.sampled_from(["signers", "kernels-signers", "trusted-root", "require-signature",
                                     "trusted-repos", "require-clean", "x"]), json_values, max_size=4).map(
        lambda doc: "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items())),
    st.builds(lambda n, o, c: "signers = " + o * n + c * n, st.sampled_from([50, 101, 5_000, 100_000]),
              st.sampled_from(["[", "{a = "]), st.sampled_from(["]", "}"])),
    st.builds(lambda n: "[" + ".".join(["t"] * n) + "]\n", st.sampled_from([50, 101, 5_000, 100_000])),
    st.builds(lambda n: ".".join(["t"] * n) + " = 1\n", st.sampled_from([101, 100_000])),
    st.text(max_size=60),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)


@HARNESS
@given(text=policy_texts)
def test_policy_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    from kernel_wheels.provenance.policy import PolicyOptions

    path = tmp_path_factory.mktemp("policy") / "policy.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    returns_or_one_line("policy file", lambda: PolicyOptions(policy_file=path).resolve())


requirement_lines = st.one_of(
    st.sampled_from(["img2gray", "img2gray==1.1.2", "img2gray @ http://u:PASSWORD@h/x.whl",
                     "img2gray --index-url http://u:PASSWORD@h/simple", "-i http://u:PASSWORD@h/simple",
                     "-r missing.txt", "-r self.txt", "-e .", "./x.whl", "img2gray \\", "# c", "",
                     "img2\x1b]0;t\x07gray", "img2gray;\u202e", "--hash=sha256:00"]),
    st.text(max_size=30),
)


@HARNESS
@given(lines=st.lists(requirement_lines, max_size=5))
def test_requirements_files(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    """install -r's reader and then each requirement's parser: returns, or one line that
    shows no password and no raw control character."""
    from kernel_wheels.errors import UsageError
    from kernel_wheels.install.core import parse_requirement
    from kernel_wheels.install.requirements import read_requirements

    folder = tmp_path_factory.mktemp("requirements")
    (folder / "self.txt").write_text("-r self.txt\n")
    path = folder / "requirements.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        for requirement in read_requirements(path):
            parse_requirement(requirement)
    except UsageError as exc:
        assert "\n" not in exc.message and "PASSWORD" not in exc.message, exc.message
        assert not any(c in exc.message for c in _RAW_CONTROLS), repr(exc.message)
