"""``install`` chooses for the GPU: a CUDA build qualifies only if its binaries hold code
that runs on the target's GPU, so that "no kernel image is available for execution on
the device" shows up at install, not at the first call.

The target's compute capability comes from ``--gpu-arch X.Y`` (also to install for
another machine), else from torch in the target Python (its current device; the probe
in ``environment``). What each build holds comes from the index's JSON page
(``kernel-wheels-gpu-code``) or, in a folder of wheels, from the wheel's own record
(``<dist-info>/kernel_wheels_gpu.json``); both are what ``check`` proved from the
binaries.

What runs where is :func:`kernel_wheels.kernel.gpu_archs.runs_on` (CUDA's rules): a
cubin that runs is chosen over PTX, which runs too, after the driver compiles it (JIT)
at its first call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..kernel.gpu_archs import GpuCode, parse_capability, runs_on
from .decision import Decision

if TYPE_CHECKING:
    from .environment import Environment

JIT_COST = ("the driver compiles its PTX for this GPU at the first call (seconds to minutes for a "
            "large kernel, then cached in ~/.nv/ComputeCache)")


@dataclass(frozen=True)
class Gpu:
    """The GPU a build must run on: its compute capability, and where that came from."""

    major: int
    minor: int
    source: str  # "--gpu-arch" or "torch"
    name: str | None = None  # "NVIDIA H200", as torch names it

    @property
    def capability(self) -> str:
        return f"{self.major}.{self.minor}"

    def describe(self) -> str:
        what = f"compute capability {self.capability}"
        return f"{self.name} ({what})" if self.name else what


def parse_gpu_arch(text: str) -> Gpu:
    capability = parse_capability(text.strip())
    # A GPU is one capability, without a suffix or PTX, that nvcc's names can name.
    if capability is None or capability.suffix or capability.ptx or capability.code is None:
        raise UsageError(f"--gpu-arch '{text}' is not a compute capability such as 8.0, 8.6 or 9.0")
    return Gpu(capability.major, capability.minor, "--gpu-arch")


def target_gpu(gpu_arch: str | None, environment: Environment) -> Gpu | None:
    if gpu_arch is not None:
        return parse_gpu_arch(gpu_arch)
    if environment.gpu_capability is not None:
        major, minor = environment.gpu_capability
        return Gpu(major, minor, "torch", environment.gpu_name)
    return None


@dataclass(frozen=True)
class GpuVerdict:
    """What one CUDA build holds and how (or whether) it runs on the GPU."""

    holds: GpuCode | None  # None: the index does not say
    cubin: str | None = None  # the cubin that runs
    ptx: str | None = None  # the PTX the driver would compile, when no cubin runs

    @property
    def runs(self) -> bool:
        return self.cubin is not None or self.ptx is not None

    def to_dict(self) -> dict[str, Any]:
        return {"holds": self.holds.to_dict() if self.holds else None,
                "runs": self.runs if self.holds else None, "cubin": self.cubin, "ptx_jit": self.ptx}


def verdict(code: GpuCode | None, gpu: Gpu) -> GpuVerdict:
    if code is None:
        return GpuVerdict(None)
    version = (gpu.major, gpu.minor)
    cubins = [name for name in code.cubins if runs_on(name, version)]
    if cubins:
        return GpuVerdict(code, cubin=cubins[-1])
    ptx = [name for name in code.ptx if runs_on(name, version)]
    return GpuVerdict(code, ptx=ptx[-1] if ptx else None)


@dataclass(frozen=True)
class GpuChoice:
    """The GPU step of a choice: the GPU (None: none visible and no --gpu-arch) and the
    verdict on each CUDA build that fitted otherwise."""

    gpu: Gpu | None
    verdicts: tuple[tuple[str, GpuVerdict], ...] = ()

    def of(self, filename: str) -> GpuVerdict | None:
        return dict(self.verdicts).get(filename)

    def to_dict(self) -> dict[str, Any]:
        return {"capability": self.gpu.capability if self.gpu else None,
                "source": self.gpu.source if self.gpu else None,
                "name": self.gpu.name if self.gpu else None,
                "files": {name: v.to_dict() for name, v in self.verdicts}}

    def no_fit(self) -> str | None:
        """The one line when CUDA builds fitted everything but the GPU, and none runs."""
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
        if found.cubin is not None:
            return [f"it holds {found.cubin}, which runs on the GPU, {self.gpu.describe()}"]
        return [f"it holds no cubin for the GPU, {self.gpu.describe()}, only PTX {found.ptx}: "
                f"{JIT_COST}"]


def judge_gpu(decisions: Sequence[Decision], gpu: Gpu | None,
              code_of: dict[str, GpuCode | None]) -> tuple[list[Decision], GpuChoice]:
    """Reject the CUDA builds (that fit otherwise) with no code for ``gpu``; keep each
    verdict. ``code_of``: what each file holds, by file name."""
    judged: list[Decision] = []
    verdicts: list[tuple[str, GpuVerdict]] = []
    for decision in decisions:
        wheel = decision.wheel
        if decision.rejected is not None or wheel is None or wheel.variant is None \
                or wheel.variant.backend != "cuda" or wheel.variant.noarch:
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
