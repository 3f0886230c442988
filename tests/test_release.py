"""kernel-wheels itself, as a user installs it (issue #24): the sdist and the wheel that
``python -m build`` makes from the working tree pass ``twine check``, the wheel holds
exactly the package's files, the sdist rebuilds the same wheel, and the installed
wheel (and, separately, the sdist) works from a fresh venv away from the checkout: the
version, every command's help, to-wheel + check + index + install + import of the sample
kernel, and the ``serve`` extra.

The build runs on a copy of the working tree (tracked files and new ones git does not
ignore, staged in a repository of its own), with the version git gives the checkout:
nothing is written into the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from support.helpers import ROOT, UV, free_port, make_venv, stop, torch_wheel, wait_for
from support.servers_index import run_op

COMMANDS = ("to-wheel", "check", "variants", "build", "index", "publish", "install", "serve")
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that points Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


@dataclass(frozen=True)
class Dists:
    project: Path  # the copy of the working tree they were built from
    version: str
    sdist: Path
    wheel: Path


def _checkout_version() -> str:
    proc = subprocess.run([sys.executable, "-m", "setuptools_scm"], cwd=ROOT, capture_output=True,
                          text=True, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _source_files() -> list[str]:
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                          capture_output=True, check=True)
    return sorted(name for name in os.fsdecode(proc.stdout).split("\0")
                  if name and (ROOT / name).is_file())


def _build(project: Path, out: Path, *args: str, version: str | None = None) -> None:
    env = clean_env(**({"SETUPTOOLS_SCM_PRETEND_VERSION": version} if version else {}))
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), *args, str(project)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """``python -m build`` of the working tree: the sdist, then the wheel built from it."""
    project = tmp_path_factory.mktemp("release") / "kernel-wheels"
    for name in _source_files():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    # A repository of its own, every file staged: setuptools-scm puts the files git knows
    # into the sdist, as it does in a clone of the real repository.
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    version = _checkout_version()
    out = project.parent / "dist"
    _build(project, out, version=version)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(project, version, sdist, wheel)


def test_the_version_comes_from_git(dists: Dists) -> None:
    version = Version(dists.version)  # PEP 440
    assert parse_wheel_filename(dists.wheel.name)[1] == version
    assert parse_sdist_filename(dists.sdist.name)[1] == version
    tags = subprocess.run(["git", "-C", str(ROOT), "tag", "--points-at", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.split()
    if f"v{version}" not in tags:  # between tags (or before the first): a development version
        assert version.is_devrelease, version


def test_twine_accepts_both(dists: Dists) -> None:
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist),
                           str(dists.wheel)], capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2, proc.stdout


def test_the_wheel_holds_exactly_the_package(dists: Dists) -> None:
    """Every file of src/kernel_wheels (modules, data tables, build_support headers,
    py.typed) and nothing else, plus the version file setuptools-scm writes."""
    expected = {name.removeprefix("src/") for name in _source_files()
                if name.startswith("src/kernel_wheels/")} | {"kernel_wheels/_version.py"}
    with zipfile.ZipFile(dists.wheel) as zf:
        names = zf.namelist()
    packaged = {n for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert sorted(expected - packaged) == [], "missing from the wheel"
    assert sorted(packaged - expected) == [], "in the wheel but not a source of the package"
    dist_info = {n.split("/", 1)[1] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert dist_info == {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt"}


def test_the_sdist_holds_what_building_needs(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "CHANGELOG.md", "PKG-INFO",
                   "src/kernel_wheels/data/variants.json", "src/kernel_wheels/build_support/registration.h",
                   "src/kernel_wheels/py.typed", "tests/test_release.py", "docs/release.md"):
        assert needed in names, needed


def test_the_sdist_rebuilds_the_same_wheel(dists: Dists, tmp_path: Path) -> None:
    """No git there: setuptools-scm takes the version from the sdist's PKG-INFO."""
    with tarfile.open(dists.sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    _build(unpacked, tmp_path / "again", "--wheel")
    (again,) = (tmp_path / "again").glob("*.whl")
    assert again.name == dists.wheel.name
    with zipfile.ZipFile(dists.wheel) as first, zipfile.ZipFile(again) as second:
        assert sorted(first.namelist()) == sorted(second.namelist())


def _install(venv: Path, requirement: str) -> Path:
    python = make_venv(venv)
    proc = subprocess.run([UV, "pip", "install", "-q", "--python", str(python), requirement],
                          capture_output=True, text=True, env=clean_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return venv / "bin" / "kernel-wheels"


def _run(tool: Path, *args: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(**env), timeout=600)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def _smoke_help(tool: Path, version: str, cwd: Path) -> None:
    assert _run(tool, "--version", cwd=cwd).stdout.strip() == f"kernel-wheels {version}"
    for command in COMMANDS:
        assert f"usage: kernel-wheels {command}" in _run(tool, command, "--help", cwd=cwd).stdout


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("release-torch") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


def test_the_built_wheel_works_away_from_the_checkout(dists: Dists, kernel_repo: Path, torch_venv: Path,
                                                      tmp_path: Path) -> None:
    tool = _install(tmp_path / "venv", str(dists.wheel))
    work = tmp_path / "elsewhere"
    work.mkdir()
    location = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c",
                               "import kernel_wheels; print(kernel_wheels.__file__)"],
                              capture_output=True, text=True, cwd=work, env=clean_env()).stdout
    assert location.startswith(str(tmp_path / "venv")), location  # not the checkout's copy
    _smoke_help(tool, dists.version, work)
    _run(tool, "to-wheel", kernel_repo, "1.1.2", "--variant", CPU_VARIANT, "-o", "wheels", cwd=work)
    (wheel,) = (work / "wheels").glob("*.whl")
    provenance = json.loads(zipfile.ZipFile(wheel).read(
        next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("kernel_wheels.json"))))
    assert provenance["generator"] == f"kernel-wheels {dists.version}"
    # The sample kernel is unsigned: check says so, and passes it (docs/provenance.md).
    assert _run(tool, "check", wheel, cwd=work).stdout == (
        f"PASS {wheel.name}\n  not verified: [provenance] img2gray "
        "build/torch213-cxx11-cpu-x86_64-linux: unsigned (no metadata.json.sigstore)\n")
    _run(tool, "index", "wheels", "-o", "site", cwd=work)
    _run(tool, "install", "img2gray", "--index-url", (work / "site" / "simple").as_uri(),
         "--python", torch_venv, cwd=work)
    result = run_op(torch_venv)
    assert result["equal"] is True and result["version"] == "1.1.2+torch213cpucxx11"


def test_the_sdist_installs_and_converts(dists: Dists, kernel_repo: Path, tmp_path: Path) -> None:
    tool = _install(tmp_path / "venv", str(dists.sdist))
    work = tmp_path / "elsewhere"
    work.mkdir()
    _smoke_help(tool, dists.version, work)
    _run(tool, "to-wheel", kernel_repo, "1.1.2", "--variant", CPU_VARIANT, "-o", "wheels", cwd=work)
    (wheel,) = (work / "wheels").glob("*.whl")
    # The sample kernel is unsigned: check says so, and passes it (docs/provenance.md).
    assert _run(tool, "check", wheel, cwd=work).stdout == (
        f"PASS {wheel.name}\n  not verified: [provenance] img2gray "
        "build/torch213-cxx11-cpu-x86_64-linux: unsigned (no metadata.json.sigstore)\n")


def test_the_serve_extra(dists: Dists, olah: object, tmp_path: Path) -> None:
    """Without the extra, serve says what to install; with it, it serves the Hub's
    kernel from the installed wheel."""
    tool = _install(tmp_path / "plain", str(dists.wheel))
    proc = subprocess.run([str(tool), "serve", "--kernels", "drbh/img2gray"], capture_output=True,
                          text=True, cwd=tmp_path, env=clean_env(), timeout=120)
    assert proc.returncode == 2 and "kernel-wheels[serve]" in proc.stderr, proc.stderr
    tool = _install(tmp_path / "served", f"kernel-wheels[serve] @ {dists.wheel.as_uri()}")
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen([str(tool), "serve", "--kernels", "drbh/img2gray", "--port", str(port),
                                   "--cache", str(tmp_path / "cache")], stdout=out, stderr=subprocess.STDOUT,
                                  cwd=tmp_path, env=clean_env(HF_ENDPOINT=olah.endpoint,  # type: ignore[attr-defined]
                                                              HF_HOME=str(tmp_path / "hf")))
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", server, log)
        page = subprocess.run([sys.executable, "-c", f"import urllib.request; print(urllib.request.urlopen("
                               f"'http://127.0.0.1:{port}/simple/img2gray/').read().decode())"],
                              capture_output=True, text=True, timeout=120).stdout
        assert "img2gray-1.1.2+torch213cpucxx11" in page, page
    finally:
        stop(server)
