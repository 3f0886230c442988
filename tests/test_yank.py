"""`kernel-wheels yank`: a release of a static site is yanked (PEP 592) on every page
that lists it, pip and `kernel-wheels install` then skip it unless pinned, and `--undo`
brings it back. Bad input is one line and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import run_cli

TARGET = "torch213-cxx11-cpu"


@pytest.fixture(scope="module")
def two_releases(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site with the CPU builds of releases 1.1.1 and 1.1.2."""
    wheels = tmp_path_factory.mktemp("yank-wheels")
    for version in ("1.1.1", "1.1.2"):
        run_cli("to-wheel", kernel_repo, version, "--variant", "*cpu*", "-o", wheels)
    site = tmp_path_factory.mktemp("yank-site") / "site"
    run_cli("index", wheels, "-o", site)
    return site


def _pip_gets(site: Path, index: str, tmp_path: Path, requirement: str = "img2gray") -> str:
    out = tmp_path / f"pip-{len(list(tmp_path.iterdir()))}"
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(out),
                           "--index-url", (site / index).as_uri(), requirement],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    [wheel] = list(out.iterdir())
    return wheel.name.split("-")[1].split("+")[0]


def _yanked(page: Path) -> dict[str, object]:
    files = json.loads((page / "index.json").read_text())["files"]
    return {f["filename"]: f.get("yanked", False) for f in files}


def test_yank_and_undo_on_every_page(two_releases: Path, tmp_path: Path) -> None:
    site = two_releases
    assert _pip_gets(site, f"{TARGET}/simple", tmp_path) == "1.1.2"
    proc = run_cli("yank", site, "img2gray", "1.1.2", "--reason", "wrong gray on odd widths")
    assert "img2gray 1.1.2 is now yanked (wrong gray on odd widths)" in proc.stderr
    for page in (site / "simple" / "img2gray", site / TARGET / "simple" / "img2gray"):
        yanked = _yanked(page)
        assert {n: y for n, y in yanked.items() if "1.1.2" in n} and all(
            y == "wrong gray on odd widths" for n, y in yanked.items() if "-1.1.2" in n)
        assert all(y is False for n, y in yanked.items() if "-1.1.1" in n)
        assert 'data-yanked="wrong gray on odd widths"' in (page / "index.html").read_text()
    # pip skips the yanked release, unless it is pinned
    assert _pip_gets(site, f"{TARGET}/simple", tmp_path) == "1.1.1"
    assert _pip_gets(site, f"{TARGET}/simple", tmp_path, "img2gray==1.1.2") == "1.1.2"
    # kernel-wheels install too
    dry = run_cli("install", "img2gray", "--index-url", (site / "simple").as_uri(), "--dry-run", "--json")
    assert "1.1.1" in json.loads(dry.stdout)["chosen"]["wheel"]
    again = run_cli("yank", site, "img2gray", "1.1.2")
    assert "already was yanked" not in again.stderr  # the reason changed: a change
    run_cli("yank", site, "img2gray", "1.1.2", "--undo")
    assert not any(_yanked(site / "simple" / "img2gray").values())
    assert _pip_gets(site, f"{TARGET}/simple", tmp_path) == "1.1.2"
    assert "already was not yanked" in run_cli("yank", site, "img2gray", "1.1.2", "--undo").stderr


@pytest.mark.parametrize("args, message", [
    (["img2gray", "9.9.9"], "the site has no img2gray 9.9.9 (it has 1.1.1, 1.1.2)"),
    (["nothing", "1.0"], "the site has no project nothing"),
    (["img2gray", "not a version"], "'not a version' is not a version (PEP 440)"),
    (["img2gray", "1.1.2", "--reason", "two\nlines"], "--reason must be one line"),
])
def test_bad_yank_is_one_line_and_changes_nothing(two_releases: Path, args: list[str], message: str) -> None:
    before = {p: p.read_bytes() for p in two_releases.rglob("index.*")}
    proc = run_cli("yank", two_releases, *args, check=False)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernel-wheels: error: ") and message in line
    assert {p: p.read_bytes() for p in two_releases.rglob("index.*")} == before


def test_yank_outside_a_site_is_refused(tmp_path: Path) -> None:
    proc = run_cli("yank", tmp_path, "img2gray", "1.1.2", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"kernel-wheels: error: {tmp_path} is not a kernel-wheels site (no files/ folder)"
