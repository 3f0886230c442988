"""The static site end to end: the sample kernel repo -> to-wheel -> `kernel-wheels index`
-> `python -m http.server` on 127.0.0.1 -> `kernel-wheels install`, plain `pip install`
and `uv pip install` from the per-target index into a fresh torch 2.13.0 venv -> import ->
the op equals the reference, torch untouched. Also: the explanation when nothing fits,
and one-line errors for a bad index URL, an unknown project and a Python without torch;
what install checks before it imports the target's torch (the cheap checks first); several
names, -U, --no-deps and a requirements file; --backend cpu on a CUDA torch. Its pip and uv
options (index settings, credentials, --pre, certificates) are in tests/test_install_options.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import UV, make_venv, one_line_error, run_cli, torch_wheel
from support.helpers import cuda_python as cuda_venv_python
from support.hostile_index import HostileIndex, answer
from support.noarch_kernel import HUB_KERNEL, build_hub_kernel
from support.servers_index import pip_env, run_op, static_server, torch_fingerprint, uninstall

CPU_WHEEL = "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
CUDA_WHEEL = "img2gray-1.1.2+torch214cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


@pytest.fixture(scope="module")
def site(kernel_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = tmp_path_factory.mktemp("install-wheels")
    run_cli("to-wheel", kernel_repo, "1.1.2", "-o", wheels)
    site = tmp_path_factory.mktemp("install-site") / "site"
    run_cli("index", wheels, "-o", site)
    return site


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    with static_server(site) as base:
        yield base


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("install-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


def test_site_serves_both_targets(site: Path) -> None:
    assert sorted(p.parent.name for p in site.glob("*/simple")) == \
        ["torch213-cxx11-cpu", "torch214-cxx11-cu130"]


def test_kernel_wheels_pip_and_uv_install_from_the_static_site(base_url: str, venv: Path) -> None:
    torch_before = torch_fingerprint(venv)
    target = f"{base_url}torch213-cxx11-cpu/simple/"
    commands = {
        "kernel-wheels install (root index)": None,
        "pip install (target index)": [str(venv), "-m", "pip", "install", "-q", "img2gray",
                                       "--index-url", target],
        "uv pip install (target index)": [UV, "pip", "install", "-q", "--python", str(venv),
                                          "img2gray", "--index-url", target],
    }
    for what, command in commands.items():
        if command is None:
            proc = run_cli("install", "img2gray", "--index-url", f"{base_url}simple/", "--python",
                           venv, env=pip_env())
            lines = proc.stdout.splitlines()
            assert lines[0] == f"chose {CPU_WHEEL}"
            assert any("torch213-cxx11-cpu-x86_64-linux: built for torch 2.13 and cpu" in line
                       for line in lines)
            assert f"  rejected {CUDA_WHEEL}: built for torch 2.14, not 2.13" in lines
            assert "torch==2.13.0+cpu pinned" in proc.stderr
        else:
            proc = subprocess.run(command, capture_output=True, text=True, env=pip_env())
            assert proc.returncode == 0, (what, proc.stderr)
        result = run_op(venv)
        assert result["equal"] is True and result["version"] == "1.1.2+torch213cpucxx11", what
        assert torch_fingerprint(venv) == torch_before, what
        uninstall(venv)


def test_nothing_fits_is_explained(base_url: str, venv: Path) -> None:
    """The CUDA target's index holds only a build for torch 2.14 + CUDA 13.0: a CPU-only
    torch 2.13 gets nothing, and is told why, file by file."""
    proc = run_cli("install", "img2gray", "--index-url", f"{base_url}torch214-cxx11-cu130/simple/",
                   "--python", venv, env=pip_env(), check=False)
    assert proc.returncode == 1
    assert f"  rejected {CUDA_WHEEL}: built for torch 2.14, not 2.13" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "kernel-wheels: error: no wheel of img2gray fits torch 2.13.0+cpu [torch213-cxx11-cpu], "
        "Python 3.11.7, linux x86_64: 1 file(s) on the index, each rejected above".replace(
            "3.11.7", _python_version(venv)))
    assert subprocess.run([str(venv), "-c", "import img2gray"],
                          capture_output=True).returncode != 0


def _python_version(venv: Path) -> str:
    return subprocess.run([str(venv), "-c",
                           "import platform; print(platform.python_version())"],
                          capture_output=True, text=True).stdout.strip()


def test_dry_run_json_and_file_urls(site: Path, venv: Path) -> None:
    proc = run_cli("install", "img2gray==1.1.2", "--index-url", (site / "simple").as_uri(),
                   "--python", venv, "--dry-run", "--json", env=pip_env())
    decision = json.loads(proc.stdout)
    assert decision["chosen"]["wheel"] == CPU_WHEEL and decision["installed"] is False
    assert decision["environment"]["target"] == "torch213-cxx11-cpu"
    assert [f["wheel"] for f in decision["files"] if not f["fits"]] == [CUDA_WHEEL]
    assert "-c" in decision["command"] and "dry run: would run" in proc.stderr
    assert subprocess.run([str(venv), "-c", "import img2gray"],
                          capture_output=True).returncode != 0


def test_dry_run_would_run_line_is_pasteable(site: Path, venv: Path, tmp_path: Path) -> None:
    """The "would run" line, pasted into a shell with KW_INSTALL_TMP set to a folder
    holding what the line says (a path with a space: every argument is quoted), installs
    the chosen file; -q prints no decision and no such line."""
    proc = run_cli("install", "img2gray==1.1.2", "--index-url", (site / "simple").as_uri(),
                   "--python", venv, "--dry-run", env=pip_env())
    line = next(x for x in proc.stderr.splitlines() if x.startswith("dry run: would run "))
    command = line.removeprefix("dry run: would run ")
    assert "kernel-wheels-install-" not in command  # no removed temporary folder named
    assert '"$KW_INSTALL_TMP"/constraints.txt' in command
    assert f"with KW_INSTALL_TMP a folder holding constraints.txt (torch==2.13.0+cpu) and links-0/ " \
           f"with {CPU_WHEEL}" in proc.stderr
    folder = tmp_path / "my install tmp"
    (folder / "links-0").mkdir(parents=True)
    (folder / "constraints.txt").write_text("torch==2.13.0+cpu\n")
    (folder / "links-0" / CPU_WHEEL).write_bytes(next(site.rglob(CPU_WHEEL)).read_bytes())
    try:
        pasted = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                                env={**pip_env(), "KW_INSTALL_TMP": str(folder)})
        assert pasted.returncode == 0, pasted.stderr
        assert subprocess.run([str(venv), "-c", "import img2gray"],
                              capture_output=True).returncode == 0
    finally:
        uninstall(venv)
    quiet = run_cli("install", "img2gray==1.1.2", "--index-url", (site / "simple").as_uri(),
                    "--python", venv, "--dry-run", "-q", env=pip_env())
    assert quiet.stdout == "" and "would run" not in quiet.stderr
    assert "chose" not in quiet.stderr


def test_install_gpu_arch_is_checked_first_and_warned_about_on_a_cpu_torch(
        site: Path, venv: Path) -> None:
    with HostileIndex() as gone:
        closed = gone.base
    bad = run_cli("install", "img2gray", "--index-url", closed + "simple/", "--python", venv,
                  "--gpu-arch", "sm90", "--dry-run", env=pip_env(), check=False)
    one_line_error(bad, "--gpu-arch 'sm90' is not a compute capability", status=2)
    assert "127.0.0.1" not in bad.stderr  # not read: the bad option is said first
    for spelling in ("9.0", "sm_90", "compute_90"):
        proc = run_cli("install", "img2gray==1.1.2", "--index-url", (site / "simple").as_uri(),
                       "--python", venv, "--gpu-arch", spelling, "--dry-run", "--json", "-q",
                       env=pip_env())
        assert json.loads(proc.stdout)["gpu"]["capability"] == "9.0"
        warnings = [x for x in proc.stderr.splitlines() if x.startswith("warning:")]
        assert warnings == [f"warning: --gpu-arch {spelling} is not used: torch 2.13.0+cpu has "
                            "no CUDA or ROCm, so no GPU build is chosen"], proc.stderr


def test_install_errors_are_one_line(base_url: str, venv: Path, tmp_path: Path) -> None:
    bare = make_venv(tmp_path / "no-torch")
    cases = [
        (["img2gray", "--index-url", "ftp://example.invalid/simple"], 2,
         "'ftp://example.invalid/simple' is not an index URL"),
        (["img2gray", "--index-url", f"{base_url}simple/", "--python", tmp_path / "nope"], 2,
         f"--python {tmp_path / 'nope'}: there is no Python interpreter there"),
        (["no-such-kernel", "--index-url", f"{base_url}simple/"], 1,
         f"{base_url}simple/ has no project no-such-kernel"),
        (["img2gray", "--index-url", f"{base_url}simple/", "--python", bare], 1,
         f"no torch in {bare}: install the torch you want first"),
        (["img2gray>>1", "--index-url", f"{base_url}simple/"], 2,
         "'img2gray>>1' is not a requirement"),
    ]
    for args, code, message in cases:
        if "--python" not in args:
            args = [*args, "--python", venv]
        proc = run_cli("install", *args, env=pip_env(), check=False)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("kernel-wheels:")]
        assert proc.returncode == code and len(errors) == 1, proc.stderr
        assert errors[0].startswith(f"kernel-wheels: error: {message}"), proc.stderr
        assert "Traceback" not in proc.stderr


def test_choice_rules_without_an_index() -> None:
    """`choose` alone: the newest release that has a fitting build wins (a newer release
    with only CUDA builds does not); yanked files and files for another Python are
    rejected with their reason; the nearest CUDA build not newer than torch's is taken."""
    from packaging.requirements import Requirement
    from packaging.tags import sys_tags

    from kernel_wheels.install.core import choose
    from kernel_wheels.install.environment import Environment
    from kernel_wheels.remote.simple_client import IndexFile

    def files(*names: str, yanked: str | None = None, requires: str | None = ">=3.9") -> list[IndexFile]:
        return [IndexFile(n, f"http://x/{n}", None, requires, yanked, True) for n in names]

    tags = tuple(str(t) for t in sys_tags())
    cpu = Environment("/p", "3.11.7", "cpython", "linux", "x86_64", tags, "2.13.0+cpu", None, True)
    cuda = Environment("/p", "3.11.7", "cpython", "linux", "x86_64", tags, "2.13.0+cu129", None,
                       True, cuda="12.9")
    tail = "-cp39-abi3-manylinux_2_28_x86_64.whl"
    listing = [*files(f"img2gray-1.2.0+torch213cu128cxx11{tail}", f"img2gray-1.2.0+torch213cu126cxx11{tail}",
                      f"img2gray-1.2.0+torch213cu130cxx11{tail}"),
               *files(f"img2gray-1.1.2+torch213cpucxx11{tail}", "img2gray-1.1.2-py3-none-any.whl"),
               *files(f"img2gray-1.1.3+torch213cpucxx11{tail}", yanked="broken"),
               *files(f"img2gray-1.1.4+torch213cpucxx11{tail}", requires=">=3.12")]
    choice = choose(Requirement("img2gray"), listing, cpu)
    assert choice.chosen and choice.chosen.file.filename == f"img2gray-1.1.2+torch213cpucxx11{tail}"
    reasons = {d.file.filename: d.rejected for d in choice.decisions}
    assert reasons[f"img2gray-1.1.3+torch213cpucxx11{tail}"] == "yanked: broken"
    assert reasons[f"img2gray-1.1.4+torch213cpucxx11{tail}"] == "needs Python >=3.12, not 3.11.7"
    assert reasons[f"img2gray-1.2.0+torch213cu128cxx11{tail}"] == "built for cu128, not cpu"
    assert reasons["img2gray-1.1.2-py3-none-any.whl"] is None  # fits, ranked lower
    choice = choose(Requirement("img2gray"), listing, cuda)
    assert choice.chosen and choice.chosen.file.filename == f"img2gray-1.2.0+torch213cu128cxx11{tail}"
    assert any("the newest CUDA build not newer than this torch's cu129" in w for w in choice.why)
    pinned = choose(Requirement("img2gray==1.1.3"), listing, cpu)
    assert pinned.chosen and "1.1.3" in pinned.chosen.file.filename  # a pin takes a yanked file


# kw-hub with a Python dependency the test index does not have: --no-deps is then the
# difference between an install and a failure.
HUB_KERNEL_WITH_DEPENDS = HUB_KERNEL.replace('backends = ["cpu"]',
                                             'backends = ["cpu"]\npython-depends = ["einops"]')


@pytest.fixture(scope="module")
def index_url(kernel_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A static index (`index` over a web server on 127.0.0.1) with two kernels: img2gray
    (its CPU build for torch 2.13) and kw-hub (Python-only, needing einops)."""
    root = tmp_path_factory.mktemp("index")
    wheels = root / "wheels"
    run_cli("to-wheel", kernel_folder, "1.1.2", "-o", wheels)
    run_cli("to-wheel", build_hub_kernel(root, HUB_KERNEL_WITH_DEPENDS), "1.0.0", "-o", wheels)
    run_cli("index", wheels, "-o", root / "site")
    with static_server(root / "site") as base:
        yield base + "simple/"


TORCH_STAND_IN = """\
# A stand-in for torch that records that it was imported, then fails: the test is about
# when install reads the target Python, not about torch itself.
import os, pathlib
pathlib.Path(os.environ["KW_TEST_TORCH_IMPORTED"]).write_text("imported")
raise ImportError("torch stand-in")
"""


def _venv_with_torch_stand_in(path: Path, pip: bool = True) -> Path:
    """A venv whose torch (2.13.0, as importlib.metadata sees it) records its import."""
    subprocess.run([UV, "venv", "-q", *(["--seed"] if pip else []), str(path)], check=True,
                   capture_output=True)
    site = next(path.glob("lib/python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(TORCH_STAND_IN)
    dist_info = site / "torch-2.13.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    (dist_info / "RECORD").write_text("")
    return path / "bin" / "python"


@pytest.mark.parametrize("case", ["bad name", "closed port", "wrong password", "no pip",
                                  "no torch", "no python"])
def test_install_checks_what_costs_nothing_before_importing_torch(case: str, index_url: str,
                                                                  tmp_path: Path) -> None:
    marker = tmp_path / "torch-imported"
    env = {**pip_env(), "KW_TEST_TORCH_IMPORTED": str(marker)}
    python = _venv_with_torch_stand_in(tmp_path / "venv", pip=case != "no pip")
    args = ["install", "img2gray", "-i", index_url, "--python", python]
    with HostileIndex() as refusing:
        refusing.routes["/simple/img2gray/"] = answer(401, b"no")
        if case == "bad name":
            args[1] = "img2gray=="
        elif case == "closed port":
            with HostileIndex() as gone:
                closed = gone.base
            args[3] = closed + "simple/"
        elif case == "wrong password":
            args[3] = refusing.url("/simple/").replace("http://", "http://reader:wrong@")
        elif case == "no torch":
            args[-1] = make_venv(tmp_path / "bare")
        elif case == "no python":
            args[-1] = tmp_path / "nonexistent" / "python"
        proc = run_cli(*args, env=env, check=False)
    expected = {"bad name": ("img2gray==",), "closed port": ("127.0.0.1",),
                "wrong password": ("401",), "no pip": ("no pip", "--installer uv"),
                "no torch": ("no torch", "--python"), "no python": ("--python",)}[case]
    one_line_error(proc, *expected, status=2 if case in ("bad name", "no python") else 1)
    assert not marker.exists(), f"{case}: torch was imported before the cheap check failed"
    assert "wrong" not in proc.stderr


def test_install_installer_uv_without_uv_is_said_before_importing_torch(index_url: str,
                                                                        tmp_path: Path) -> None:
    """A machine without uv, made with a fault: a stand-in ``uv`` package that fails to
    import shadows the real one (which this venv has), and PATH holds no uv."""
    marker = tmp_path / "torch-imported"
    python = _venv_with_torch_stand_in(tmp_path / "venv")
    shadow = tmp_path / "shadow" / "uv"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no uv on this machine (test fault)")\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {**pip_env(), "KW_TEST_TORCH_IMPORTED": str(marker), "PATH": str(bin_dir),
           "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("install", "img2gray", "-i", index_url, "--python", python, "--installer", "uv",
                   env=env, check=False)
    one_line_error(proc, "--installer uv", "uv is not installed", status=2)
    assert not marker.exists()


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("torch-venv") / "venv",
                     torch=torch_wheel(tmp_path_factory.mktemp("torch-wheel")))


def _installed(python: Path) -> set[str]:
    proc = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"],
                          capture_output=True, text=True, check=True, env=pip_env())
    return {row["name"].lower() for row in json.loads(proc.stdout)}


def test_install_several_names_no_deps_upgrade_and_a_requirements_file(
        index_url: str, torch_venv: Path, tmp_path: Path) -> None:
    # kw-hub needs einops, which the index does not have: pip cannot install it ...
    failed = run_cli("install", "img2gray", "kw-hub", "-i", index_url, "--python", torch_venv,
                     env=pip_env(), check=False)
    one_line_error(failed, "einops")
    assert not {"img2gray", "kw-hub"} & _installed(torch_venv)  # nothing half-installed
    # ... and with --no-deps both go in, in one run
    proc = run_cli("install", "-U", "img2gray", "kw-hub", "--no-deps", "-i", index_url,
                   "--python", torch_venv, env=pip_env())
    assert "chose img2gray-1.1.2+" in proc.stdout and "chose kw_hub-1.0.0+" in proc.stdout
    assert {"img2gray", "kw-hub"} <= _installed(torch_venv)
    assert "einops" not in _installed(torch_venv)
    # a requirements file of kernels, as pip reads one (comments, blank lines)
    requirements = tmp_path / "kernels.txt"
    requirements.write_text("# the kernels this service loads\nimg2gray==1.1.2  # pinned\n\n"
                            "kw-hub>=1\n")
    again = run_cli("install", "-r", requirements, "--no-deps", "-i", index_url,
                    "--python", torch_venv, env=pip_env(), check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("chose ") == 2
    # what pip would do with it and install cannot is refused, by line
    requirements.write_text("--index-url http://elsewhere/simple/\nimg2gray\n")
    refused = run_cli("install", "-r", requirements, "-i", index_url, "--python", torch_venv,
                      env=pip_env(), check=False)
    one_line_error(refused, f"{requirements}:1", status=2)


def test_install_backend_cpu_on_a_cuda_torch(index_url: str) -> None:
    cuda_python = cuda_venv_python()  # fails (not skips) without the CUDA torch venv
    refused = run_cli("install", "kw-hub", "-i", index_url, "--python", cuda_python,
                      "--dry-run", env=pip_env(), check=False)
    line = one_line_error(refused, "no wheel of kw-hub fits", "a CPU build fits this torch",
                          "--backend cpu")
    assert "cu130" in line
    chosen = run_cli("install", "kw-hub", "-i", index_url, "--python", cuda_python,
                     "--dry-run", "--backend", "cpu", "--json", env=pip_env())
    document = json.loads(chosen.stdout)
    assert document["chosen"]["wheel"].startswith("kw_hub-1.0.0+")
    assert document["environment"]["target"].endswith("-cpu")


def test_install_no_backend_cpu_hint_when_the_cpu_build_is_for_another_torch(
        index_url: str) -> None:
    """img2gray's only CPU build is for torch 2.13; the CUDA venv's torch is 2.14: the
    error says that build does not fit either, and does not offer --backend cpu (which
    would fail again)."""
    cuda_python = cuda_venv_python()
    refused = run_cli("install", "img2gray", "-i", index_url, "--python", cuda_python,
                      "--dry-run", env=pip_env(), check=False)
    line = one_line_error(refused, "no wheel of img2gray fits",
                          "the CPU build there (torch213-cxx11-cpu-x86_64-linux) does not fit "
                          "this torch either")
    assert "--backend cpu" not in line
    again = run_cli("install", "img2gray", "-i", index_url, "--python", cuda_python,
                    "--dry-run", "--backend", "cpu", env=pip_env(), check=False)
    one_line_error(again, "no wheel of img2gray fits")  # what the hint would have led to
