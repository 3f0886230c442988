"""`kernel-wheels local-kernels` maps each installed kernel to its Hub repository (what the
`kernels` library's LOCAL_KERNELS reads): the id `build` records from build.toml's
[general.hub], and the one to-wheel's --repo-id gives a plain folder's wheels. Real builds,
real wheels installed with uv into a real venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.helpers import UV, make_venv, run_cli
from support.noarch_kernel import build_hub_kernel
from support.servers_index import pip_env


def _pip_install(python: Path, *wheels: Path) -> None:
    subprocess.run([UV, "pip", "install", "-q", "--no-deps", "--python", str(python),
                    *map(str, wheels)], check=True, capture_output=True, env=pip_env())


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without torch: local-kernels reads dist-infos only."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v")


def test_build_records_hub_repo_id_and_local_kernels_maps_it(tmp_path: Path,
                                                             plain_venv: Path) -> None:
    build_hub_kernel(tmp_path)
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
