"""The import guard: a binary wheel installed next to a torch it was not built for fails
`import img2gray` with an ImportError that names the build, the running torch and the
command that gets the right wheel; next to the right torch it changes nothing.

The two torches are real: torch 2.13.0 (CPU) in .venv and torch 2.14.1 (CUDA 13.0) in
.venv-cuda. Wheels are installed with pip into a target folder put on PYTHONPATH, so
that neither venv is changed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.helpers import ROOT, read_member, run_cli

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
CUDA_PYTHON = Path(os.environ.get("KW_CUDA_PYTHON", ROOT / ".venv-cuda" / "bin" / "python"))
IMAGE_CHECK = ("import torch, img2gray\n"
               "x = torch.randint(0, 256, (7, 9, 3), dtype=torch.uint8)\n"
               "print(tuple(img2gray.img2gray(x).shape))\n")


def _variants(tmp: Path, builds: dict[str, Path]) -> Path:
    """A kernel folder whose build/<name> is a copy of the given build folder."""
    root = tmp / "img2gray"
    for name, build in builds.items():
        shutil.copytree(build, root / "build" / name)
    return root


def _wheel(source: Path, out: Path, *extra: str) -> Path:
    run_cli("to-wheel", source, "1.1.2", "-o", out, *extra)
    (wheel,) = out.glob("*.whl")
    return wheel


def _install(wheel: Path, target: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    return target


def _import(python: Path, site: Path, code: str = IMAGE_CHECK,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=site.parent,
                          env={**os.environ, "PYTHONPATH": str(site), **(env or {})}, timeout=300)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def cpu_wheel(cpu_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("guard-cpu")
    return _wheel(_variants(tmp, {CPU: cpu_build}), tmp / "out")


@pytest.fixture(scope="module")
def cuda_wheel(cuda_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("guard-cuda")
    return _wheel(_variants(tmp, {CUDA: cuda_build}), tmp / "out")


def test_right_torch_imports_and_runs(cpu_wheel: Path, tmp_path: Path) -> None:
    site = _install(cpu_wheel, tmp_path / "site")
    proc = _import(Path(sys.executable), site)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(7, 9)"


def test_cuda_wheel_on_cpu_only_torch(cuda_wheel: Path, tmp_path: Path) -> None:
    site = _install(cuda_wheel, tmp_path / "site")
    proc = _import(Path(sys.executable), site, "import img2gray")
    assert proc.returncode == 1
    assert _last_line(proc) == (
        "ImportError: img2gray 1.1.2+torch214cu130cxx11 is the build torch214-cxx11-cu130-x86_64-linux, "
        "which does not fit this Python's torch 2.13.0+cpu (CPU only): it needs torch 2.14; it needs a "
        "CUDA build of torch. Install the build for this torch: kernel-wheels install img2gray==1.1.2 "
        "--index-url <your index> (or: pip install img2gray==1.1.2 --index-url "
        "<your index>/torch213-cxx11-cpu/simple)")
    assert "undefined symbol" not in proc.stderr and "cannot open shared object" not in proc.stderr


def test_other_torch_minor(cpu_wheel: Path, tmp_path: Path) -> None:
    site = _install(cpu_wheel, tmp_path / "site")
    proc = _import(CUDA_PYTHON, site, "import img2gray")
    assert proc.returncode == 1
    line = _last_line(proc)
    assert line.startswith("ImportError: img2gray 1.1.2+torch213cpucxx11 is the build "
                           "torch213-cxx11-cpu-x86_64-linux, which does not fit this Python's torch 2.14.1")
    assert "(CUDA 13.0): it needs torch 2.13. Install the build for this torch:" in line
    assert line.endswith("--index-url <your index>/torch214-cxx11-cu130/simple)")


def test_other_cxx_abi_and_cuda_major(cpu_build: Path, cuda_build: Path, tmp_path: Path) -> None:
    # The same binaries under the names of builds for another C++ ABI and another CUDA
    # major: the guard answers before any of them is loaded.
    cxx98 = _wheel(_variants(tmp_path / "a", {"torch213-cxx98-cpu-x86_64-linux": cpu_build}),
                   tmp_path / "a" / "out")
    proc = _import(Path(sys.executable), _install(cxx98, tmp_path / "site-a"), "import img2gray")
    assert proc.returncode == 1
    assert "it was built with the cxx98 C++ ABI, this torch uses cxx11" in _last_line(proc)
    cu128 = _wheel(_variants(tmp_path / "b", {"torch214-cxx11-cu128-x86_64-linux": cuda_build}),
                   tmp_path / "b" / "out")
    cu129_on_130 = _import(CUDA_PYTHON, _install(cu128, tmp_path / "site-b"), "import img2gray")
    # CUDA 12.8 build, CUDA 13.0 torch: another major
    assert cu129_on_130.returncode == 1
    assert "(CUDA 13.0): it needs CUDA 12.x, at least 12.8." in _last_line(cu129_on_130)


def test_stable_abi_build_fits_newer_torch_only(cpu_build: Path, tmp_path: Path) -> None:
    wheel = _wheel(_variants(tmp_path, {"torch-stable-abi214-cpu-x86_64-linux": cpu_build}),
                   tmp_path / "out")
    site = _install(wheel, tmp_path / "site")
    older = _import(Path(sys.executable), site, "import img2gray")
    assert older.returncode == 1 and "it needs torch 2.14 or newer" in _last_line(older)
    # torch 2.14.1 is new enough: the guard lets the import through (the binary itself
    # was built for 2.13, which is not the guard's business here, so only import the guard).
    newer = _import(CUDA_PYTHON, site, "import importlib; importlib.import_module('img2gray._kernel_wheels_guard')")
    assert newer.returncode == 0, newer.stderr


def test_skip_guard_variable(cuda_wheel: Path, tmp_path: Path) -> None:
    site = _install(cuda_wheel, tmp_path / "site")
    proc = _import(Path(sys.executable), site, "import img2gray",
                   env={"KERNEL_WHEELS_SKIP_GUARD": "1"})
    # past the guard, the loader's own error: what the guard exists to replace
    assert proc.returncode == 1 and "libc10_cuda.so" in proc.stderr


def test_noarch_wheels_have_no_guard(matrix_folder: Path, tmp_path: Path) -> None:
    run_cli("to-wheel", matrix_folder, "1.1.2", "-o", tmp_path, "--variant", "torch-cuda",
            "--variant", "torch-universal", "--variant", "tvm-ffi*")
    assert len(list(tmp_path.glob("*.whl"))) == 3
    for wheel in tmp_path.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            assert not any("_kernel_wheels_guard" in n for n in zf.namelist()), wheel.name
            assert b"_kernel_wheels_guard" not in zf.read("img2gray/__init__.py")
        added = json.loads(read_member(wheel, "kernel_wheels.json"))["added_by_kernel_wheels"]
        assert added == {"loader": "img2gray/__init__.py"}


def test_check_verifies_the_kernel_files_against_their_digest(cpu_wheel: Path, tmp_path: Path) -> None:
    """The kernel's own __init__.py is carried unchanged (the guard lives in the loader
    beside it); changed (RECORD updated to hide it), the kernel's digest still catches it."""
    assert run_cli("check", cpu_wheel).returncode == 0
    kernel_init = f"img2gray/{CPU}/__init__.py"
    tampered = tmp_path / cpu_wheel.name
    with zipfile.ZipFile(cpu_wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        init = src.read(kernel_init) + b"import os\n"
        digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == kernel_init:
                data = init
            elif info.filename.endswith("RECORD"):
                rows = [row if not row.startswith(kernel_init + ",")
                        else f"{kernel_init},sha256={digest},{len(init)}"
                        for row in data.decode().splitlines()]
                data = ("\n".join(rows) + "\n").encode()
            dst.writestr(zipfile.ZipInfo(info.filename, info.date_time), data)
    proc = run_cli("check", tampered, check=False)
    assert proc.returncode == 1
    assert f"fail: [digest] {kernel_init} differs from its metadata.json digest" in proc.stdout


def test_the_guard_is_beside_the_kernel_not_in_it(cpu_wheel: Path, cpu_build: Path) -> None:
    with zipfile.ZipFile(cpu_wheel) as zf:
        assert zf.read(f"img2gray/{CPU}/__init__.py") == (cpu_build / "__init__.py").read_bytes()
        loader = zf.read("img2gray/__init__.py").decode()
    assert "from . import _kernel_wheels_guard" in loader and CPU in loader
