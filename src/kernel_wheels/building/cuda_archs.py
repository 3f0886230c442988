"""Which CUDA capabilities a kernel component is compiled for, as kernel-builder
decides it, and the nvcc ``-gencode`` flags for them.

kernel-builder keeps, for each capability the CUDA toolkit supports (the *targets*),
the highest capability the component lists that can run there: the same major
version, or any lower one marked ``+PTX`` (PTX is JIT-compiled forward). So a
capability the toolkit cannot build (``10.1`` with CUDA 13) or that no target can run
(``5.0``) drops out, and a component whose list leaves nothing is an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..errors import BuildError
from ..kernel.gpu_archs import EXAMPLES, PTX, Capability, parse_capability


def _capability(arch: str) -> Capability:
    capability = parse_capability(arch)
    if capability is None:
        raise BuildError(f"'{arch}' is not a CUDA capability such as {EXAMPLES}")
    return capability


def _base(arch: str) -> str:
    return arch.removesuffix(PTX)


def check_arch(arch: str) -> str:
    _capability(arch)
    return arch


def sort_archs(archs: Iterable[str]) -> list[str]:
    return sorted(set(archs), key=lambda a: (_capability(a).order, a.endswith(PTX)))


def loose_intersection(requested: Iterable[str], targets: Iterable[str]) -> list[str]:
    """kernel-builder's ``cuda_archs_loose_intersection``: for each target capability,
    the highest requested one that runs there; ``+PTX`` kept where it was asked for;
    an ``a``/``f`` variant (``9.0a``) only when its base capability is a target."""
    requested = list(dict.fromkeys(requested))
    ptx = {_base(a) for a in requested if a.endswith(PTX)}
    source = list(dict.fromkeys(_base(a) for a in requested))
    remaining_targets = [t for t in targets]
    result: list[str] = []
    for arch in list(source):
        if _capability(arch).suffix:  # architecture-specific (9.0a) or family (10.0f) code
            source.remove(arch)
            plain = _capability(arch).plain
            if plain in targets:
                if plain in remaining_targets:
                    remaining_targets.remove(plain)
                result.append(arch)
    source.sort(key=lambda a: _capability(a).order)
    for target in remaining_targets:
        gpu = _capability(target).version
        running = [a for a in source if replace(_capability(a), ptx=a in ptx).runs_on(gpu)]
        if running and running[-1] not in result:
            result.append(running[-1])
    return sort_archs(f"{a}{PTX}" if a in ptx else a for a in result)


def gencode_flags(archs: Iterable[str]) -> list[str]:
    """``8.0`` -> SASS for sm_80; ``9.0+PTX`` -> SASS for sm_90 and compute_90 PTX."""
    flags = []
    for arch in sort_archs(archs):
        number = _capability(arch).number
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if arch.endswith(PTX):
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


@dataclass(frozen=True)
class ArchPlan:
    """The capabilities of one build: ``targets`` (no ``+PTX``) for intersecting the
    components' lists, ``default`` for components that list none."""

    targets: tuple[str, ...]
    default: tuple[str, ...]
    narrowed: bool

    def for_component(self, where: str, capabilities: tuple[str, ...] | None,
                      cuda_version: str) -> list[str]:
        if capabilities is None:
            return sort_archs(self.default)
        for arch in capabilities:
            check_arch(arch)
        archs = loose_intersection(capabilities, self.targets)
        if not archs:
            scope = "the archs asked for" if self.narrowed else f"CUDA {cuda_version} builds"
            raise BuildError(
                f"{where}: no CUDA capability left: none of its cuda-capabilities "
                f"({', '.join(capabilities)}) can run on {scope} ({', '.join(self.targets)})")
        return archs


def parse_arch_list(text: str) -> tuple[str, ...]:
    """``TORCH_CUDA_ARCH_LIST`` syntax: ``"8.0;9.0+PTX"`` or ``"8.0 9.0"``."""
    return tuple(a for a in re.split(r"[;\s,]+", text.strip()) if a)


def plan_archs(toolkit_default: tuple[str, ...], supported: tuple[str, ...],
               narrow: tuple[str, ...] = ()) -> ArchPlan:
    """``narrow`` (``--arch``, else ``TORCH_CUDA_ARCH_LIST``) replaces kernel-builder's
    full set for a quick local build, as kernel-builder's local builds use the
    capability of the GPU they run on."""
    if not narrow and (env := os.environ.get("TORCH_CUDA_ARCH_LIST")):
        narrow = parse_arch_list(env)
    if narrow:
        for arch in narrow:
            if _capability(arch).plain not in supported:
                raise BuildError(f"CUDA capability {arch} was asked for, but this nvcc supports "
                                 f"only {', '.join(supported)}")
        return ArchPlan(tuple(sort_archs(_base(a) for a in narrow)), tuple(sort_archs(narrow)), True)
    return ArchPlan(tuple(sort_archs(_base(a) for a in toolkit_default)), toolkit_default, False)
