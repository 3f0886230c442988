"""Issue #33 (UX round 3): what a newcomer and a platform engineer tripped over, each
tried as they would, with the real command, real servers on 127.0.0.1 and real venvs."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import UV, make_venv, one_line_error, run_cli
from support.servers_index import IndexServer, pip_env, pypiserver


@pytest.fixture(scope="module")
def kernel_folder(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder holding the sample kernel's CPU build, as `build -o` writes it."""
    root = tmp_path_factory.mktemp("kernel") / "img2gray"
    shutil.copytree(cpu_build, root / "build" / cpu_build.name)
    return root


@pytest.fixture(scope="module")
def variant_output(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`to-wheel --variants` output: the plain wheel and its variant wheel."""
    out = tmp_path_factory.mktemp("variants")
    run_cli("to-wheel", kernel_folder, "1.1.2", "--variants", "-o", out)
    assert len(list(out.glob("*.whl"))) == 2
    return out


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    with pypiserver(tmp_path_factory.mktemp("pypiserver")) as server:
        yield server


def _publish_env(server: IndexServer) -> dict[str, str]:
    return {**pip_env(), "TWINE_USERNAME": server.username, "TWINE_PASSWORD": server.password}


# --- 1. publish refuses variant wheels up front --------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_publish_refuses_variant_wheels_before_uploading(variant_output: Path, pypi: IndexServer,
                                                         as_json: bool) -> None:
    proc = run_cli("publish", variant_output, "--repository-url", pypi.upload_url,
                   *(["--json"] if as_json else []), env=_publish_env(pypi), check=False)
    line = one_line_error(proc, "variant wheel", "index", status=2)
    assert "--variants" in line, line
    assert pypi.listing() == {}  # nothing uploaded, not even the plain wheel
    if as_json:
        error = json.loads(proc.stdout)["error"]
        assert error["type"] == "UsageError" and "variant wheel" in error["message"]


# --- 5. self-built kernels carry their Hub repository to get_kernel ------------------------

HUB_KERNEL = """\
[general]
name = "kw-hub"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "acme/kw-hub"

[torch-noarch]
"""


def _pip_install(python: Path, *wheels: Path) -> None:
    subprocess.run([UV, "pip", "install", "-q", "--no-deps", "--python", str(python),
                    *map(str, wheels)], check=True, capture_output=True, env=pip_env())


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without torch: local-kernels reads dist-infos only."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v")


def test_build_records_hub_repo_id_and_local_kernels_maps_it(tmp_path: Path,
                                                             plain_venv: Path) -> None:
    tree = tmp_path / "kw-hub"
    (tree / "torch-ext" / "kw_hub").mkdir(parents=True)
    (tree / "torch-ext" / "kw_hub" / "__init__.py").write_text("")
    (tree / "build.toml").write_text(HUB_KERNEL)
    run_cli("build", tree, "-o", tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "build" / "torch-cpu" / "metadata.json").read_text())
    assert meta["repo-id"] == "acme/kw-hub"
    run_cli("to-wheel", tmp_path / "out", "1.0.0", "-o", tmp_path / "wheels")
    _pip_install(plain_venv, *(tmp_path / "wheels").glob("*.whl"))
    proc = run_cli("local-kernels", "--python", plain_venv)
    installed = plain_venv.parent.parent / "lib"
    mapping = dict(entry.split("=", 1) for entry in proc.stdout.strip().split(":"))
    assert Path(mapping["acme/kw-hub"]).is_relative_to(installed), proc.stdout
    assert (Path(mapping["acme/kw-hub"]) / "metadata.json").is_file()
    assert "no repository id" not in proc.stderr


def test_to_wheel_repo_id_of_a_plain_folder(kernel_folder: Path, tmp_path: Path,
                                            plain_venv: Path) -> None:
    run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", "acme/img2gray", "-o", tmp_path)
    wheel = next(tmp_path.glob("*.whl"))
    _pip_install(plain_venv, wheel)
    listed = json.loads(run_cli("local-kernels", "--python", plain_venv, "--json").stdout)
    assert {k["distribution"]: k["repo_id"] for k in listed}["img2gray"] == "acme/img2gray"


@pytest.mark.parametrize("repo_id", ["acme", "acme/../x", "a/b=c", "a/b:c"])
def test_to_wheel_refuses_a_malformed_repo_id(kernel_folder: Path, tmp_path: Path,
                                              repo_id: str) -> None:
    proc = run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", repo_id, "-o", tmp_path,
                   check=False)
    one_line_error(proc, "--repo-id", "org/name", status=2)
    assert not list(tmp_path.iterdir())


def test_metadata_repo_id_from_a_hostile_folder_is_refused(kernel_folder: Path,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "k"
    shutil.copytree(kernel_folder, root)
    meta_path = next(root.glob("build/*/metadata.json"))
    meta = json.loads(meta_path.read_text())
    meta["repo-id"] = "acme/x=/etc:evil/y"
    meta_path.write_text(json.dumps(meta))
    proc = run_cli("to-wheel", root, "1.1.2", "-o", tmp_path / "out", check=False)
    one_line_error(proc, "repo-id", status=1)
