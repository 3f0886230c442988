"""tvm-ffi kernels (issue #23): `[tvm-ffi]` in build.toml, built for CPU and CUDA as
kernel-builder lays them out (build/tvm-ffi<XY>-<backend>-<arch>-linux/: the package,
kernel-builder's _ops.py, the library _<name>_<backend>_<id>.so that tvm_ffi.load_module
loads, metadata.json), converted, checked and loaded with `kernels.get_local_kernel`.

A tvm-ffi kernel needs no torch to build: apache-tvm-ffi (a dev dependency) and, for
CUDA, nvcc. Both backends are built here in the CPU venv; the CUDA one only for 9.0.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kernel_wheels.building.symbol_versions import over_limit
from support.elf_oracle import dynamic_symbols
from support.helpers import cuda_python, run_cli

KERNELS = Path(__file__).parent / "kernels"
TVM_FFI = "tvm-ffi{}{}".format(*re.findall(r"\d+", metadata.version("apache-tvm-ffi"))[:2])
CPU = f"{TVM_FFI}-cpu-x86_64-linux"
CUDA = f"{TVM_FFI}-cu130-x86_64-linux"


@pytest.fixture(scope="module")
def tvm_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("kw-tvm-ffi")
    proc = run_cli("build", KERNELS / "kw-tvm-ffi", "-o", out, "--arch", "9.0", check=False,
                   env={"KERNEL_WHEELS_CACHE": str(tmp_path_factory.mktemp("cache"))})
    assert proc.returncode == 0, proc.stderr
    return out, proc


def needed(so: Path) -> set[str]:
    with so.open("rb") as stream:
        dynamic = ELFFile(stream).get_section_by_name(".dynamic")
        return {tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}


def test_cpu_and_cuda_variants_as_kernel_builder_lays_them_out(
        tvm_build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = tvm_build
    assert sorted(p.name for p in (out / "build").iterdir()) == sorted([CPU, CUDA])
    assert proc.stdout.split() == [str(out / "build" / CPU), str(out / "build" / CUDA)]
    for variant, backend in ((CPU, "cpu"), (CUDA, "cuda")):
        folder = out / "build" / variant
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        library = next(f for f in files if f.endswith(".so"))
        assert re.fullmatch(rf"_kw_tvm_ffi_{backend}_[0-9a-f]{{7}}\.so", library)  # no abi3 part
        assert files == sorted(["__init__.py", "_ops.py", library, "layers/__init__.py", "metadata.json"])
        ops = (folder / "_ops.py").read_text()
        assert f'ops = tvm_ffi.load_module(_SELF_PATH / "{library}")' in ops
        meta = json.loads((folder / "metadata.json").read_text())
        assert meta["id"] == library.removesuffix(".so") and meta["name"] == "kw-tvm-ffi"
        assert meta["backend"] == ({"type": "cpu"} if backend == "cpu" else {"type": "cuda", "archs": ["9.0"]})
        symbols = dynamic_symbols(folder / library)
        assert symbols.defined == {f"__tvm_ffi_add_one_{backend}"}  # only the exported function
        assert over_limit(symbols.versioned_imports) == []
        libraries = needed(folder / library)
        assert "libtvm_ffi.so" in libraries and not any("torch" in n or "c10" in n for n in libraries)
    assert "libcudart.so.13" in needed(next((out / "build" / CUDA).glob("*.so")))


def test_the_cuda_library_holds_sass_for_the_asked_capability(
        tvm_build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = tvm_build
    venv = cuda_python().parent.parent  # the CUDA venv's triton carries a cuobjdump
    tool = next(f for f in [shutil.which("cuobjdump"), *map(str, venv.glob(
        "lib/python*/site-packages/triton/backends/nvidia/bin/cuobjdump"))] if f)
    listing = subprocess.run([tool, "--list-elf", str(next((out / "build" / CUDA).glob("*.so")))],
                             capture_output=True, text=True, check=True).stdout
    assert {w.split(".")[-2] for w in listing.split() if w.endswith(".cubin")} == {"sm_90"}


def test_the_cpu_variant_loads_and_runs(tvm_build: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = tvm_build
    program = """
import sys, torch
from pathlib import Path
from kernels import get_local_kernel
kernel = get_local_kernel(Path(sys.argv[1]))
x = torch.arange(6, dtype=torch.float32)
print(kernel.add_one(x, torch.empty_like(x)).tolist(), kernel.layers.LAYERS, kernel.__file__)
try:
    kernel.add_one(torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
except TypeError as exc:
    print(str(exc).splitlines()[-1])
"""
    proc = subprocess.run([sys.executable, "-c", program, str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"[1.0, 2.0, 3.0, 4.0, 5.0, 6.0] ['AddOne'] {out / 'build' / CPU / '__init__.py'}"
    assert lines[1].endswith("add_one: float32 only")


def test_both_variants_convert_and_pass_check(tvm_build: tuple[Path, subprocess.CompletedProcess[str]],
                                               tmp_path: Path) -> None:
    out, _ = tvm_build
    run_cli("to-wheel", out, "1.0.0", "-o", tmp_path / "wheels")
    wheels = sorted(p.name for p in (tmp_path / "wheels").iterdir())
    label = TVM_FFI.replace("-", "")
    assert wheels == [f"kw_tvm_ffi-1.0.0+{label}cpu-cp39-abi3-manylinux_2_28_x86_64.whl",
                      f"kw_tvm_ffi-1.0.0+{label}cu130-cp39-abi3-manylinux_2_28_x86_64.whl"]
    report = run_cli("check", "-v", *(tmp_path / "wheels").iterdir()).stdout
    assert report.count("PASS ") == 2 and "fail:" not in report
    with zipfile.ZipFile(tmp_path / "wheels" / wheels[0]) as wheel:
        meta = wheel.read(next(n for n in wheel.namelist() if n.endswith("METADATA"))).decode()
    version = ".".join(re.findall(r"\d+", metadata.version("apache-tvm-ffi"))[:2])
    assert f"Requires-Dist: apache-tvm-ffi=={version}.*" in meta.splitlines()
