"""Real GPU builds for the tests, made here without a GPU: CUDA shared objects compiled by
nvcc 13 the way kernel-builder's CMake compiles a kernel (one object per ``.cu`` file with
its component's ``-gencode`` flags, linked into one extension), HIP shared objects
compiled by Debian's clang (``-x hip --offload-arch=...``: the compiler hipcc drives,
writing the same ``.hip_fatbin`` offload bundles), and wheels made from them by
``to-wheel``. Also a stand-in torch for ROCm (named as such): a package that reports a
ROCm torch and an AMD GPU's ``gcnArchName``, for install's probe, since this machine has
no AMD GPU and no ROCm torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernel_wheels.kernel.digest import digest_folder

from .helpers import run_cli

NVCC = Path(os.environ.get("KW_NVCC", "/usr/local/cuda/bin/nvcc"))
#: Debian's clang 19 (scripts/test.sh installs clang-19, lld-19 and clang-tools-19): its
#: AMDGPU target knows gfx90a and gfx942 and its offload bundler compresses (CCOB).
CLANG = Path(os.environ.get("KW_CLANG", "/usr/lib/llvm-19/bin/clang"))
#: kernel-builder's default capabilities with CUDA >= 13 (its preamble.cmake), and its
#: metadata.json spelling of them: sorted(set(...)) in Python's string order.
DEFAULT_ARCHS = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX")
CUDA_VARIANT = "torch214-cxx11-cu130-x86_64-linux"
ROCM_VARIANT = "torch213-cxx11-rocm71-x86_64-linux"

KERNEL = """\
__global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" void launch(float* x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); }
"""
#: A .cu file of host code only (a binding, a dispatcher): nvcc still writes a cubin (and
#: PTX) for each -gencode, with no kernel in it.
HOST_ONLY = """\
extern "C" int dispatch(int which) { return which * 2 + 1; }
"""
#: Device functions but no kernel (kept in the cubin with -rdc as STT_FUNC symbols).
DEVICE_ONLY = """\
extern "C" __device__ __noinline__ float twice(float x) { return x * 2.0f; }
"""
#: HIP without ROCm's headers: the attributes hip_runtime.h would define, and the launch
#: function's declaration the compiler needs for a kernel's host stub.
HIP_PRELUDE = """\
#define __global__ __attribute__((global))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t* hipStream_t;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, unsigned long, hipStream_t);
"""
HIP_KERNEL = HIP_PRELUDE + """\
extern "C" __global__ void add_one(float* x, int n) { if (n > 0) x[0] += 1.0f; }
"""
HIP_OTHER_KERNEL = HIP_PRELUDE + """\
extern "C" __global__ void times_two(float* x) { x[0] *= 2.0f; }
"""
HIP_HOST_ONLY = "extern \"C\" int dispatch(int which) { return which * 2 + 1; }\n"


def gencodes(archs: tuple[str, ...]) -> list[str]:
    """kernel-builder's -gencode flags for capabilities (``9.0a``, ``12.1+PTX``)."""
    flags = []
    for arch in archs:
        number = arch.removesuffix("+PTX").replace(".", "")
        flags += ["-gencode", f"arch=compute_{number},code=sm_{number}"]
        if arch.endswith("+PTX"):
            flags += ["-gencode", f"arch=compute_{number},code=compute_{number}"]
    return flags


def _run(command: list[str]) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(command)}\n{proc.stdout}{proc.stderr}"


def nvcc_shared(out: Path, parts: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> Path:
    """A shared object linked from one object per (source, capabilities, extra nvcc flags),
    each compiled with its own -gencode flags, as CMake compiles a component's files."""
    objects = []
    for index, (source, archs, extra) in enumerate(parts):
        cu = out.parent / f"{out.stem}-{index}.cu"
        cu.write_text(source)
        obj = cu.with_suffix(".o")
        _run([str(NVCC), "-c", "-Xcompiler", "-fPIC", *gencodes(archs), *extra, "-o", str(obj), str(cu)])
        objects.append(str(obj))
    # -cudart none: the CUDA runtime is the user's torch's; the binary stays small
    _run([str(NVCC), "-shared", "-cudart", "none", "-o", str(out), *objects])
    return out


def nvcc_cubin(out: Path, source: str, arch: str, extra: tuple[str, ...] = ()) -> bytes:
    """A cubin alone (``nvcc -cubin``)."""
    cu = out.with_suffix(".cu")
    cu.write_text(source)
    number = arch.replace(".", "")
    _run([str(NVCC), "-cubin", f"-arch=sm_{number}", *extra, "-o", str(out), str(cu)])
    return out.read_bytes()


def nvcc_fatbin(out: Path, archs: tuple[str, ...], source: str = KERNEL) -> Path:
    """nvcc's fat binary alone (``nvcc -fatbin``) of ``source`` for capabilities ``archs``:
    what a CUDA build's ``.nv_fatbin`` section holds (:func:`support.gpu_stub.add_section`
    adds it to a host binary)."""
    cu = out.with_suffix(".cu")
    cu.write_text(source)
    _run([str(NVCC), "-fatbin", *gencodes(archs), "-o", str(out), str(cu)])
    return out


def clang_hip_bundle(out: Path, targets: tuple[str, ...], source: str = HIP_KERNEL) -> Path:
    """clang's offload bundle of HIP code objects alone (device code only) of ``source``
    for AMD targets: what a ROCm build's ``.hip_fatbin`` section holds."""
    hip = out.with_suffix(".hip")
    hip.write_text(source)
    _run([str(CLANG), "-x", "hip", *(f"--offload-arch={t}" for t in targets), "-nogpulib", "-nogpuinc",
          "-O2", "--cuda-device-only", "--gpu-bundle-output", "-o", str(out), str(hip)])
    return out


def clang_hip_shared(out: Path, parts: list[tuple[str, tuple[str, ...]]], extra: tuple[str, ...] = ()) -> Path:
    """A HIP shared object: one object per (source, target IDs), compiled for its
    targets as hipcc compiles (clang -x hip --offload-arch=...), linked together."""
    if not CLANG.exists():
        import pytest

        pytest.fail(f"no clang with the AMDGPU target at {CLANG}: run scripts/test.sh (it installs "
                    "Debian's clang-19, lld-19 and clang-tools-19) or set KW_CLANG")
    objects = []
    for index, (source, targets) in enumerate(parts):
        hip = out.parent / f"{out.stem}-{index}.hip"
        hip.write_text(source)
        obj = hip.with_suffix(".o")
        _run([str(CLANG), "-x", "hip", *(f"--offload-arch={t}" for t in targets), "-nogpulib",
              "-nogpuinc", "-fPIC", "-O2", *extra, "-c", "-o", str(obj), str(hip)])
        objects.append(str(obj))
    _run([str(CLANG), "-shared", "-o", str(out), *objects])
    return out


def make_gpu_wheel(tmp: Path, binaries: dict[str, Path], archs: list[str] | None,
                   variant: str = CUDA_VARIANT, version: str = "1.0.0", check: bool = True,
                   extra: list[str] | None = None,
                   expect: int = 0) -> tuple[Path | None, subprocess.CompletedProcess[str]]:
    """A GPU build of ``gpucode`` holding ``binaries`` (libNAME.so) with metadata.json as
    kernel-builder writes it, converted by to-wheel: (the wheel, to-wheel's run)."""
    repo = tmp / f"repo-{version}-{variant}"
    folder = repo / "build" / variant
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from . import _ops\n")
    (folder / "_ops.py").write_text("ops = None\n")
    for name, path in binaries.items():
        (folder / f"lib{name}.so").write_bytes(path.read_bytes())
    backend: dict[str, Any] = {"type": "rocm" if "-rocm" in variant else "cuda" if "-cu" in variant else "cpu"}
    if archs is not None:
        backend["archs"] = archs
    metadata = {"name": "gpucode", "id": "_gpucode_0", "version": 1, "license": "Apache-2.0",
                "python-depends": [], "backend": backend,
                "digest": {"algorithm": "sha256", "files": digest_folder(folder)}}
    (folder / "metadata.json").write_text(json.dumps(metadata))
    out = tmp / "dist"
    proc = run_cli("to-wheel", repo, version, "-o", out, *([] if check else ["--no-check"]),
                   *(extra or []), check=False)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    found = sorted(out.glob(f"gpucode-{version}+*.whl")) if out.exists() else []
    return (found[0] if found else None), proc


def kernel_builder_archs(*components: tuple[str, ...]) -> list[str]:
    """metadata.json's backend.archs as kernel-builder writes it: every component's
    capabilities (add_build_metadata.py: ``sorted(set(...))``)."""
    return sorted({arch for component in components for arch in component})


#: The stand-in torch's package: what install's probe reads from a ROCm torch.
_TORCH_STANDIN = '''\
"""A stand-in for a ROCm torch (kernel-wheels' tests): versions and one AMD GPU."""
import types

__version__ = "{torch}"
version = types.SimpleNamespace(cuda=None, hip="{hip}", xpu=None)
_C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)
backends = types.SimpleNamespace()


class _Properties:
    gcnArchName = "{arch}"
    name = "{device}"


class _Cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def get_device_properties(index):
        return _Properties()

    @staticmethod
    def get_device_name(index=None):
        return "{device}"

    @staticmethod
    def get_device_capability(index=None):
        return (9, 4)  # what ROCm's torch answers for gfx942: no CUDA capability


cuda = _Cuda()
'''


def rocm_torch_standin(folder: Path, arch_name: str, device: str = "AMD Instinct MI300X",
                       torch: str = "2.13.0+rocm7.1", hip: str = "7.1.25424") -> Path:
    """A virtual environment (no pip) whose torch is the stand-in above: its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        _TORCH_STANDIN.format(torch=torch, hip=hip, arch=arch_name, device=device))
    dist_info = site / f"torch-{torch}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\n")
    (dist_info / "RECORD").write_text("")
    return python
