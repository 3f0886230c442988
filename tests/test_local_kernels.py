"""`kernel-wheels local-kernels` maps each installed kernel to its Hub repository (what the
`kernels` library's LOCAL_KERNELS reads): the id `build` records from build.toml's
[general.hub], and the one to-wheel's --repo-id gives a plain folder's wheels. Real builds,
real wheels installed with uv into a real venv, and the real `kernels.get_kernel`.

Issue #37, point 6: `to-wheel ./anything 1.0.0 --repo-id kernels-community/flash-attn`
made a wheel that, once installed, local-kernels mapped to flash-attn's id without a word,
so `get_kernel("kernels-community/flash-attn")` loaded it. Now an id must name its kernel
(to-wheel refuses one that does not), every mapped id says where it came from, and an id
typed by hand is mapped only when the machine's user opts in (--allow-hand-ids,
KERNEL_WHEELS_ALLOW_HAND_IDS=1)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.helpers import UV, make_kernels_venv, make_venv, one_line_error, run_cli
from support.noarch_kernel import HUB_KERNEL, build_hub_kernel
from support.servers_index import pip_env

HAND = "acme/img2gray"  # typed by hand: the sample kernel's name, an org nothing confirms


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
    # Mapped without an opt-in, and saying where the id came from:
    assert "acme/kw-hub -> kw-hub 1.0.0+cpu: id from its build's metadata.json (build.toml's " \
           "[general.hub] repo-id)" in proc.stderr.splitlines(), proc.stderr
    listed = json.loads(run_cli("local-kernels", "--python", plain_venv, "--json").stdout)
    (kw_hub,) = [kernel for kernel in listed if kernel["distribution"] == "kw-hub"]
    assert (kw_hub["repo_id_from"], kw_hub["mapped"], kw_hub["left_out"]) == ("metadata.json", True, None)


def test_to_wheel_repo_id_of_a_plain_folder(kernel_folder: Path, tmp_path: Path,
                                            plain_venv: Path) -> None:
    run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", "acme/img2gray", "-o", tmp_path)
    wheel = next(tmp_path.glob("*.whl"))
    _pip_install(plain_venv, wheel)
    listed = json.loads(run_cli("local-kernels", "--python", plain_venv, "--json").stdout)
    assert {k["distribution"]: k["repo_id"] for k in listed}["img2gray"] == "acme/img2gray"


# --- issue #37, point 6: an id must name its kernel, and one typed by hand needs an opt-in -----


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


@pytest.fixture(scope="module")
def hand_wheel(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample kernel converted from a plain folder with an id typed by hand."""
    out = tmp_path_factory.mktemp("hand-wheel")
    run_cli("to-wheel", kernel_folder, "1.1.2", "--repo-id", HAND, "-o", out)
    (wheel,) = out.glob("*.whl")
    return wheel


def test_an_id_typed_by_hand_is_mapped_only_when_the_user_opts_in(hand_wheel: Path,
                                                                  tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    _pip_install(python, hand_wheel)
    left_out = run_cli("local-kernels", "--python", python)
    assert left_out.stdout.strip() == "", left_out.stdout
    assert ("warning: img2gray 1.1.2+torch213cpucxx11: its repository id acme/img2gray is typed by "
            "hand (to-wheel --repo-id): not mapped; if you trust it, map it with --allow-hand-ids (or "
            "KERNEL_WHEELS_ALLOW_HAND_IDS=1)") in left_out.stderr.splitlines(), left_out.stderr
    assert "acme/img2gray" in run_cli("local-kernels", "--python", python, "-q").stderr  # a warning
    (listed,) = json.loads(run_cli("local-kernels", "--python", python, "--json").stdout)
    assert (listed["repo_id"], listed["repo_id_from"], listed["mapped"]) == (HAND, "--repo-id", False)
    folder = Path(listed["path"])
    for opt_in, env in ((("--allow-hand-ids",), {}), ((), {"KERNEL_WHEELS_ALLOW_HAND_IDS": "1"})):
        proc = run_cli("local-kernels", "--python", python, *opt_in, env=env)
        assert proc.stdout.strip() == f"{HAND}={folder}", proc.stdout
        assert f"{HAND} -> img2gray 1.1.2+torch213cpucxx11: id typed by hand (to-wheel --repo-id)" \
            in proc.stderr.splitlines(), proc.stderr
        (mapped,) = json.loads(run_cli("local-kernels", "--python", python, "--json", *opt_in,
                                       env=env).stdout)
        assert (mapped["repo_id_from"], mapped["mapped"], mapped["left_out"]) == ("--repo-id", True, None)
    # The flag wins over the environment, both ways.
    off = run_cli("local-kernels", "--python", python, "--no-allow-hand-ids",
                  env={"KERNEL_WHEELS_ALLOW_HAND_IDS": "1"})
    assert off.stdout.strip() == ""
    bad = run_cli("local-kernels", "--python", python, env={"KERNEL_WHEELS_ALLOW_HAND_IDS": "yes"},
                  check=False)
    one_line_error(bad, "KERNEL_WHEELS_ALLOW_HAND_IDS='yes': set it to 1", status=2)
    assert bad.stdout == ""


GET_KERNELS = """
import json, sys, torch
from kernels import get_kernel
sys.path.insert(0, sys.argv[1])
from support.gray import reference_gray
loaded = {}
for repo_id in ("acme/kw-hub", "acme/img2gray"):
    try:
        kernel = get_kernel(repo_id, version=1)
    except Exception as exc:  # not mapped: offline, with nothing in the HF cache
        loaded[repo_id] = {"error": type(exc).__name__}
        continue
    loaded[repo_id] = {"file": kernel.__file__}
    if repo_id == "acme/img2gray":
        image = torch.randint(0, 256, (17, 23, 3), dtype=torch.uint8)
        loaded[repo_id]["equal"] = bool(torch.equal(kernel.img2gray(image), reference_gray(image)))
    else:
        loaded[repo_id]["answer"] = kernel.answer()
print(json.dumps(loaded))
"""


def test_get_kernel_loads_only_what_local_kernels_maps(hand_wheel: Path, tmp_path: Path,
                                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    """The real kernels library, offline, through LOCAL_KERNELS as local-kernels prints it:
    the kernel whose id its build recorded loads; the one whose id was typed by hand loads
    only once the user opted in."""
    python = make_kernels_venv(tmp_path / "venv", tmp_path_factory.mktemp("torch-wheel"))
    build_hub_kernel(tmp_path / "kw-hub")
    run_cli("to-wheel", tmp_path / "kw-hub" / "out", "1.0.0", "-o", tmp_path / "wheels")
    _pip_install(python, hand_wheel, *(tmp_path / "wheels").glob("*.whl"))
    site = Path(json.loads(run_cli("local-kernels", "--python", python, "--json").stdout)[0]["path"]).parent.parent
    offline = {**pip_env(), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf"),
               "HF_ENDPOINT": "http://127.0.0.1:9"}
    hub = {"file": str(site / "kw_hub" / "torch-cpu" / "__init__.py"), "answer": 42}
    hand = {"file": str(site / "img2gray" / "torch213-cxx11-cpu-x86_64-linux" / "__init__.py"),
            "equal": True}

    def get_kernels(*opt_in: str) -> dict[str, dict[str, object]]:
        mapping = run_cli("local-kernels", "--python", python, *opt_in).stdout.strip()
        proc = subprocess.run([str(python), "-c", GET_KERNELS, str(Path(__file__).parent)],
                              capture_output=True, text=True, env={**offline, "LOCAL_KERNELS": mapping},
                              cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        loaded: dict[str, dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
        return loaded

    without = get_kernels()
    assert without["acme/kw-hub"] == hub
    assert "error" in without["acme/img2gray"], without  # not the installed folder
    assert get_kernels("--allow-hand-ids") == {"acme/kw-hub": hub, "acme/img2gray": hand}
