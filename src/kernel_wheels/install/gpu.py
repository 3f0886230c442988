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

from ..kernel.gpu_archs import GpuCode
from ..kernel.gpu_target import Gpu, GpuVerdict, gpu_verdict, parse_gpu_arch
from .decision import Decision

if TYPE_CHECKING:
    from .environment import Environment

JIT_COST = ("the driver compiles its PTX for this GPU at the first call (seconds to minutes for a "
            "large kernel, then cached in ~/.nv/ComputeCache)")


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
        found = gpu_verdict(code, gpu)
        verdicts.append((decision.file.filename, found))
        if found.holds is not None and not found.runs:
            judged.append(replace(decision, rejected=f"holds {found.holds.describe()}: no code for "
                                                     f"the GPU, {gpu.describe()}"))
        else:
            judged.append(decision)
    return judged, GpuChoice(gpu, tuple(verdicts))
