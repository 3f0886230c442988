"""``install`` chooses for the GPU: a CUDA or ROCm build qualifies only if its binaries
hold a kernel that runs on the target's GPU, so that "no kernel image is available for
execution on the device" shows up at install, not at the first call.

The target's GPU comes from ``--gpu-arch`` (also to install for another machine): a
compute capability ``X.Y`` for an NVIDIA GPU, a target ID ``gfx942`` or
``gfx942:sramecc+:xnack-`` for an AMD one; else from torch in the target Python (its
current device: ``get_device_capability()`` on CUDA, ``gcnArchName`` on ROCm; the probe
in ``environment``). What each build holds comes from the index's JSON page
(``kernel-wheels-gpu-code``) or, in a folder of wheels, from the wheel's own record
(``<dist-info>/kernel_wheels_gpu.json``); both are what ``check`` proved from the
binaries.

What runs where is :mod:`kernel_wheels.kernel.gpu_archs` (CUDA's rules, and AMD's
target IDs): a cubin that runs is chosen over PTX, which runs too, after the driver
compiles it (JIT) at its first call; a HIP code object runs on its own processor when
the features it states agree with the GPU's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..kernel.gpu_archs import GpuCode, amd_runs_on, parse_amd_target, parse_capability, runs_on
from .decision import Decision

if TYPE_CHECKING:
    from .environment import Environment

JIT_COST = ("the driver compiles its PTX for this GPU at the first call (seconds to minutes for a "
            "large kernel, then cached in ~/.nv/ComputeCache)")


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
    if parse_amd_target(given) is not None:
        return Gpu(given, "--gpu-arch")
    raise UsageError(f"--gpu-arch '{text}' is not a compute capability such as 8.0, 8.6 or 9.0, "
                     "nor an AMD GPU target such as gfx90a or gfx942:sramecc+:xnack-")


def target_gpu(gpu_arch: str | None, environment: Environment) -> Gpu | None:
    if gpu_arch is not None:
        return parse_gpu_arch(gpu_arch)
    if environment.gpu_capability is not None:
        major, minor = environment.gpu_capability
        return Gpu(f"{major}.{minor}", "torch", environment.gpu_name)
    if environment.gpu_arch_name is not None:
        return Gpu(environment.gpu_arch_name, "torch", environment.gpu_name)
    return None


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


def verdict(code: GpuCode | None, gpu: Gpu) -> GpuVerdict:
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


@dataclass(frozen=True)
class GpuChoice:
    """The GPU step of a choice: the GPU (None: none visible and no --gpu-arch) and the
    verdict on each GPU build that fitted otherwise."""

    gpu: Gpu | None
    verdicts: tuple[tuple[str, GpuVerdict], ...] = ()

    def of(self, filename: str) -> GpuVerdict | None:
        return dict(self.verdicts).get(filename)

    def to_dict(self) -> dict[str, Any]:
        return {"capability": self.gpu.capability if self.gpu else None,
                "arch": self.gpu.arch if self.gpu else None,
                "source": self.gpu.source if self.gpu else None,
                "name": self.gpu.name if self.gpu else None,
                "files": {name: v.to_dict() for name, v in self.verdicts}}

    def no_fit(self) -> str | None:
        """The one line when GPU builds fitted everything but the GPU, and none runs."""
        if self.gpu is None or not self.verdicts or any(v.runs or v.holds is None for _, v in self.verdicts):
            return None
        held = "; ".join(f"{name} holds {v.holds.describe() if v.holds else '?'}"
                         for name, v in self.verdicts)
        return f"no build runs on the GPU, {self.gpu.describe()}: {held}"

    def why(self, chosen: str) -> list[str]:
        """The lines install adds to why it chose ``chosen``."""
        found = self.of(chosen)
        if self.gpu is None:
            if found is None:
                return []
            held = found.holds.describe() if found.holds else "device code the index does not list"
            return [f"no GPU visible to torch and no --gpu-arch: not checked which GPUs it runs on "
                    f"(it holds {held})"]
        if found is None:
            return []
        if found.holds is None:
            return [f"the index does not list its device code: not checked that it runs on the GPU, "
                    f"{self.gpu.describe()}"]
        if found.cubin is not None or found.code_object is not None:
            return [f"it holds {found.cubin or found.code_object}, which runs on the GPU, "
                    f"{self.gpu.describe()}"]
        return [f"it holds no cubin for the GPU, {self.gpu.describe()}, only PTX {found.ptx}: "
                f"{JIT_COST}"]


def judge_gpu(decisions: Sequence[Decision], gpu: Gpu | None,
              code_of: dict[str, GpuCode | None]) -> tuple[list[Decision], GpuChoice]:
    """Reject the CUDA and ROCm builds (that fit otherwise) with no code for ``gpu``; keep
    each verdict. ``code_of``: what each file holds, by file name."""
    judged: list[Decision] = []
    verdicts: list[tuple[str, GpuVerdict]] = []
    for decision in decisions:
        wheel = decision.wheel
        if decision.rejected is not None or wheel is None or wheel.variant is None \
                or wheel.variant.backend not in ("cuda", "rocm") or wheel.variant.noarch:
            judged.append(decision)
            continue
        code = code_of.get(decision.file.filename)
        if gpu is None:
            verdicts.append((decision.file.filename, GpuVerdict(code)))
            judged.append(decision)
            continue
        found = verdict(code, gpu)
        verdicts.append((decision.file.filename, found))
        if found.holds is not None and not found.runs:
            judged.append(replace(decision, rejected=f"holds {found.holds.describe()}: no code for "
                                                     f"the GPU, {gpu.describe()}"))
        else:
            judged.append(decision)
    return judged, GpuChoice(gpu, tuple(verdicts))
