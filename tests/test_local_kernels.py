"""`kernel-wheels local-kernels` maps each installed kernel to its Hub repository (what the
`kernels` library's LOCAL_KERNELS reads): the id `build` records from build.toml's
[general.hub], and the one to-wheel's --repo-id gives a plain folder's wheels. Real builds,
real wheels installed with uv into a real venv.

Issue #37, point 6: `to-wheel ./anything 1.0.0 --repo-id kernels-community/flash-attn`
made a wheel that, once installed, local-kernels mapped to flash-attn's id without a word,
so `get_kernel("kernels-community/flash-attn")` loaded it. Now an id must name its kernel:
to-wheel refuses one that does not."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.helpers import UV, make_venv, one_line_error, run_cli
from support.noarch_kernel import HUB_KERNEL, build_hub_kernel
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


# --- issue #37, point 6: an id must name its kernel ----------------------------------------


@pytest.mark.parametrize("repo_id", ["kernels-community/flash-attn", "acme/img2gray-evil"])
def test_to_wheel_refuses_a_repo_id_of_another_kernel(kernel_folder: Path, tmp_path: Path,
                                                      repo_id: str) -> None:
    """The issue's command, on the sample kernel (img2gray) in a folder of any name."""
    anything = tmp_path / "anything"
    shutil.copytree(kernel_folder, anything)
    proc = run_cli("to-wheel", anything, "1.0.0", "--repo-id", repo_id, "-o", tmp_path / "out",
                   check=False)
    org, name = repo_id.split("/")
    one_line_error(proc, f"--repo-id {repo_id} names the kernel {name}, but",
                   "is the kernel img2gray: a repository id must name its kernel "
                   f"(--repo-id {org}/img2gray)", status=2)
    assert not (tmp_path / "out").exists()


def test_to_wheel_refuses_a_build_whose_metadata_repo_id_names_another_kernel(tmp_path: Path) -> None:
    build_hub_kernel(tmp_path, HUB_KERNEL.replace('"acme/kw-hub"', '"kernels-community/flash-attn"'))
    proc = run_cli("to-wheel", tmp_path / "out", "1.0.0", "-o", tmp_path / "wheels", check=False)
    one_line_error(proc, "build/torch-cpu/metadata.json: 'repo-id' kernels-community/flash-attn names "
                         "the kernel flash-attn, but the kernel is kw-hub", "--repo-id ORG/kw-hub", status=1)
    assert not (tmp_path / "wheels").exists()


def test_a_repo_id_names_its_kernel_as_normalised(tmp_path: Path) -> None:
    """kw-hub, kw_hub and KW.Hub are one name (PEP 503, as the Hub ignores case); the org
    is not compared (nothing offline says which org a kernel belongs to)."""
    build_hub_kernel(tmp_path)
    refused = run_cli("to-wheel", tmp_path / "out", "1.0.0", "--repo-id", "acme/kw-hubs", "-o",
                      tmp_path / "refused", check=False)
    one_line_error(refused, "--repo-id acme/kw-hubs names the kernel kw-hubs, but", status=2)
    for number, repo_id in enumerate(["acme/kw_hub", "ACME/KW-Hub", "other-org/kw.hub"]):
        run_cli("to-wheel", tmp_path / "out", "1.0.0", "--repo-id", repo_id, "-o", tmp_path / str(number))
        (wheel,) = (tmp_path / str(number)).glob("*.whl")
        assert f"recorded as the Hub repository {repo_id} (--repo-id)" in run_cli("check", "-v", wheel).stdout
