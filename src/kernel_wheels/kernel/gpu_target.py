"""The GPU a build must run on (an NVIDIA GPU's compute capability or an AMD GPU's
target ID, from ``--gpu-arch`` or from torch), and whether the device code a build holds
runs there: the target half of :mod:`.gpu_archs`, which ``install`` chooses by and the
verdict on a downloaded wheel (checks/verdict.py) judges by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .gpu_archs import (
    GpuCode,
    amd_runs_on,
    parse_amd_target,
    parse_capability,
    parse_code_name,
    runs_on,
)


@dataclass(frozen=True)
class Gpu:
    """The GPU a build must run on, and where that came from: an NVIDIA GPU's compute
    capability (``9.0``) or an AMD GPU's target ID (``gfx942:sramecc+:xnack-``)."""

    arch: str
    source: str  # "--gpu-arch" or "torch"
    name: str | None = None  # "NVIDIA H200", as torch names it

    @property
    def amd(self) -> bool:
        return self.arch.startswith("gfx")

    @property
    def capability(self) -> str | None:
        """The compute capability of an NVIDIA GPU (None for an AMD one)."""
        return None if self.amd else self.arch

    def describe(self) -> str:
        what = self.arch if self.amd else f"compute capability {self.arch}"
        return f"{self.name} ({what})" if self.name else what


def parse_gpu_arch(text: str) -> Gpu:
    given = text.strip()
    capability = parse_capability(given)
    # An NVIDIA GPU is one capability, without a suffix or PTX, that nvcc's names can name.
    if capability is not None and not capability.suffix and not capability.ptx and capability.code:
        return Gpu(capability.plain, "--gpu-arch")
    # nvcc's spelling of the same GPU: sm_90 or compute_90 (one GPU: no a/f suffix).
    code = parse_code_name(given)
    if code is not None and not code.suffix:
        return Gpu(code.capability, "--gpu-arch")
    if parse_amd_target(given) is not None:
        return Gpu(given, "--gpu-arch")
    raise UsageError(f"--gpu-arch '{text}' is not a compute capability such as 8.0, 8.6 or 9.0 "
                     "(or nvcc's sm_90, compute_90), nor an AMD GPU target such as gfx90a or "
                     "gfx942:sramecc+:xnack-")


@dataclass(frozen=True)
class GpuVerdict:
    """What one CUDA or ROCm build holds and how (or whether) it runs on the GPU."""

    holds: GpuCode | None  # None: the index does not say
    cubin: str | None = None  # the cubin that runs
    ptx: str | None = None  # the PTX the driver would compile, when no cubin runs
    code_object: str | None = None  # the HIP code object that runs (an AMD GPU)

    @property
    def runs(self) -> bool:
        return self.cubin is not None or self.ptx is not None or self.code_object is not None

    def to_dict(self) -> dict[str, Any]:
        return {"holds": self.holds.to_dict() if self.holds else None,
                "runs": self.runs if self.holds else None, "cubin": self.cubin, "ptx_jit": self.ptx,
                "code_object": self.code_object}


def gpu_verdict(code: GpuCode | None, gpu: Gpu) -> GpuVerdict:
    """How ``code`` (None: nobody said what a build holds) runs on ``gpu``, if it does."""
    if code is None:
        return GpuVerdict(None)
    if gpu.amd:
        running = [name for name in code.code_objects if amd_runs_on(name, gpu.arch)]
        return GpuVerdict(code, code_object=running[-1] if running else None)
    capability = parse_capability(gpu.arch)
    version = capability.version if capability else (0, 0)
    cubins = [name for name in code.cubins if runs_on(name, version)]
    if cubins:
        return GpuVerdict(code, cubin=cubins[-1])
    ptx = [name for name in code.ptx if runs_on(name, version)]
    return GpuVerdict(code, ptx=ptx[-1] if ptx else None)
