"""GPU builds made from a real host binary, for fixtures and benchmarks that stand a CPU
extension in for a GPU one (since issue #32, ``check`` fails a CUDA build whose binaries
hold no device code):

- :func:`with_device_code`: a copy of the binary with a ``.nv_fatbin`` section whose fat
  binary lists cubins and PTX for the given architectures (entries without payload,
  where only the headers are read);
- :func:`with_real_device_code`: a copy with *real* device code holding a kernel, as the
  toolchains write it: nvcc's fat binary for CUDA capabilities (``.nv_fatbin``), clang's
  offload bundle of HIP code objects for AMD targets (``.hip_fatbin``), each added to
  the host binary with objcopy. The benchmark (``benchmarks/kwbench/kernel.py``) builds its
  GPU variants with it.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

_KIND = {"sm": 2, "compute": 1}


def fatbin(names: tuple[str, ...]) -> bytes:
    """A fat binary container with one empty entry per ``sm_80`` / ``compute_90`` name."""
    body = b""
    for name in names:
        prefix, number = name.split("_")
        kind = _KIND[prefix]
        body += struct.pack("<HHIQIIIIIIQQQ", kind, 0x101, 64, 0, 0, 0, 0x10008 if kind == 2 else 0x90000,
                            int(number), 0, 0, 0x11, 0, 0)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def with_device_code(binary: Path, target: Path,
                     names: tuple[str, ...] = ("sm_80", "sm_90", "compute_90")) -> Path:
    """``binary`` copied to ``target`` with a fat binary for ``names`` (default: what the
    fixtures' metadata.json claims, 8.0 and 9.0+PTX)."""
    with tempfile.TemporaryDirectory() as scratch:
        blob = Path(scratch) / "fatbin"
        blob.write_bytes(fatbin(names))
        subprocess.run(["objcopy", "--add-section", f".nv_fatbin={blob}", "--set-section-flags",
                        ".nv_fatbin=readonly,data", str(binary), str(target)], check=True,
                       capture_output=True)
    return target


# --- real device code -----------------------------------------------------------------

#: A kernel (a ``__global__`` function): a cubin or code object without one runs nothing.
CUDA_KERNEL = """\
__global__ void kw_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""
#: The same for HIP, without ROCm's headers (the attribute hip_runtime.h defines).
HIP_KERNEL = """\
#define __global__ __attribute__((global))
extern "C" __global__ void kw_scale(float* x, float a, int n) { if (n > 0) x[0] *= a; }
"""
SECTIONS = {"cuda": ".nv_fatbin", "rocm": ".hip_fatbin"}


def nvcc() -> Path:
    """nvcc: ``KW_NVCC``, else the one on PATH, else CUDA's default place."""
    return Path(os.environ.get("KW_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")


def hip_clang() -> Path:
    """A clang with the AMDGPU target: ``KW_CLANG``, else Debian's clang 19."""
    return Path(os.environ.get("KW_CLANG", "/usr/lib/llvm-19/bin/clang"))


def gencodes(archs: Sequence[str]) -> list[str]:
    """nvcc's ``-gencode`` flags for capabilities in kernel-builder's spelling
    (``8.0``, ``9.0a``, ``12.0+PTX``): a cubin each, and PTX for ``+PTX``."""
    flags = []
    for arch in archs:
        number = arch.removesuffix("+PTX").replace(".", "")
        flags += ["-gencode", f"arch=compute_{number},code=sm_{number}"]
        if arch.endswith("+PTX"):
            flags += ["-gencode", f"arch=compute_{number},code=compute_{number}"]
    return flags


def _compile(command: list[str], tool: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(f"{tool} not found at {command[0]}: device code is compiled for real "
                           f"(set KW_NVCC / KW_CLANG)") from None
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stdout}{proc.stderr}")


def device_code(backend: str, archs: Sequence[str], dest: Path) -> Path:
    """``dest``: the device code of :data:`CUDA_KERNEL` (``cuda``: nvcc's fat binary for
    capabilities such as ``9.0+PTX``) or :data:`HIP_KERNEL` (``rocm``: clang's offload
    bundle for targets such as ``gfx942``), compiled for ``archs``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        if backend == "cuda":
            source = Path(scratch) / "kernel.cu"
            source.write_text(CUDA_KERNEL)
            _compile([str(nvcc()), "-fatbin", *gencodes(archs), "-o", str(dest), str(source)], "nvcc")
        elif backend == "rocm":
            source = Path(scratch) / "kernel.hip"
            source.write_text(HIP_KERNEL)
            _compile([str(hip_clang()), "-x", "hip", *(f"--offload-arch={a}" for a in archs),
                      "-nogpulib", "-nogpuinc", "-O2", "--cuda-device-only", "--gpu-bundle-output",
                      "-o", str(dest), str(source)], "clang (AMDGPU target)")
        else:
            raise ValueError(f"no device code for backend {backend}")
    return dest


def with_real_device_code(binary: Path, target: Path, backend: str, code: Path) -> Path:
    """``binary`` copied to ``target`` (the same path: in place) with ``code`` (from
    :func:`device_code`) in the section that backend's runtime loads."""
    section = SECTIONS[backend]
    subprocess.run(["objcopy", "--add-section", f"{section}={code}", "--set-section-flags",
                    f"{section}=contents,readonly", str(binary), str(target)], check=True,
                   capture_output=True)
    return target
