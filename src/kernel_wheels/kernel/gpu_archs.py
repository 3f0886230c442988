"""GPU architectures: their spellings, their order, and which code runs on which GPU
(CUDA's capabilities and device code; AMD's target IDs for ROCm builds).

kernel-builder (metadata.json's ``backend.archs``, build.toml's ``cuda-capabilities``,
``TORCH_CUDA_ARCH_LIST``) names a *capability*, ``X.Y[a|f][+PTX]``: code for compute
capability X.Y, ``a`` for code of exactly that architecture (``9.0a``), ``f`` for code
of its family (``10.0f``), ``+PTX`` for PTX beside the machine code (``9.0+PTX``).
nvcc, and so a fat binary and the record a wheel carries, names *device code*:
``sm_XY[a|f]`` a cubin (machine code, SASS), ``compute_XY[a|f]`` PTX. So ``9.0+PTX``
is ``sm_90`` and ``compute_90``.

kernel-builder reads a capability as two numbers, so ``99999.0`` is one (it runs on no
GPU, and drops out of a build); nvcc's names hold a one-digit minor version, so only a
capability up to ``99.9`` has device code to name (:attr:`Capability.code`).

What runs where (CUDA's rules, :func:`runs_on`): a cubin ``sm_XY`` runs on capability
X.y with y >= Y (family code ``sm_XYf`` likewise), ``sm_XYa`` only on X.Y itself. PTX
``compute_XY`` is compiled by the driver (JIT) for any capability >= X.Y
(``compute_XYa`` only X.Y, ``compute_XYf`` X.y with y >= Y).

AMD GPUs (ROCm, HIP) are named by a *target ID* (LLVM's AMDGPUUsage, "Target ID"):
a processor and the target features the code was built for, ``gfx90a`` or
``gfx942:sramecc+:xnack-``. torch on ROCm reports a GPU's own, with every feature
stated (``gcnArchName``); a HIP code object runs on a GPU of the same processor whose
features agree with every feature the code object states (one that states none runs
with either setting). metadata.json's ``backend.archs`` of a ROCm build lists
processors (``gfx90a``), as kernel-builder's ``rocm-archs`` do.

A claim is judged by what runs where (:func:`judge_claim`): held under its own name,
held under another name that runs there (``9.0a`` claimed, ``sm_90`` held: a note), or
not held at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

PTX = "+PTX"
#: Capabilities as a message shows what is expected.
EXAMPLES = "8.0, 9.0a or 9.0+PTX"

_CAPABILITY = re.compile(r"([0-9]+)\.([0-9]+)([af]?)(\+PTX)?")
_CODE_NAME = re.compile(r"(sm|compute)_([0-9]{1,2})([0-9])([af]?)")
#: A processor (``gfx906``, ``gfx90a``, ``gfx1201``, a generic ``gfx9-4-generic``) and at
#: most a few features, each ``:name+`` or ``:name-`` (LLVM knows ``sramecc`` and ``xnack``).
_AMD_TARGET = re.compile(r"(gfx[0-9]{2,3}[0-9a-f]|gfx[0-9]{1,2}(?:-[0-9])?-generic)"
                         r"((?::[a-z][a-z0-9]{0,15}[+-]){0,4})")


@dataclass(frozen=True)
class Capability:
    """A capability as kernel-builder writes it (``9.0``, ``9.0a``, ``10.0f``, ``9.0+PTX``)."""

    major: int
    minor: int
    suffix: str = ""  # "", "a" (this architecture only) or "f" (its family)
    ptx: bool = False

    @property
    def number(self) -> str:
        """``90a``: the number nvcc's names carry (``sm_90a``, ``compute_90a``)."""
        return f"{self.major}{self.minor}{self.suffix}"

    @property
    def plain(self) -> str:
        """``9.0`` for ``9.0a+PTX``: the capability without suffix and PTX."""
        return f"{self.major}.{self.minor}"

    @property
    def version(self) -> tuple[int, int]:
        return self.major, self.minor

    @property
    def order(self) -> tuple[int, int, str]:
        """Sort key: by version, then suffix."""
        return self.major, self.minor, self.suffix

    @property
    def code(self) -> GpuCode | None:
        """The device code it stands for (``9.0+PTX`` is ``sm_90`` and ``compute_90``);
        None when nvcc has no name for it (``10.10``, ``100.0``)."""
        if self.major > 99 or self.minor > 9:
            return None
        return GpuCode((f"sm_{self.number}",), (f"compute_{self.number}",) if self.ptx else ())

    def runs_on(self, gpu: tuple[int, int]) -> bool:
        """Whether its machine code, or else its PTX, runs on a GPU of capability ``gpu``."""
        return (_runs(True, self.version, self.suffix, gpu)
                or self.ptx and _runs(False, self.version, self.suffix, gpu))


def parse_capability(text: str) -> Capability | None:
    """``9.0a+PTX`` -> ``Capability(9, 0, "a", True)``; None for anything else."""
    match = _CAPABILITY.fullmatch(text)
    if match is None:
        return None
    return Capability(int(match[1]), int(match[2]), match[3], match[4] is not None)


@dataclass(frozen=True)
class CodeName:
    """A name of device code as nvcc writes it: ``sm_90a`` (a cubin), ``compute_80`` (PTX)."""

    kind: str  # "sm" (a cubin) or "compute" (PTX)
    major: int
    minor: int
    suffix: str = ""

    @property
    def capability(self) -> str:
        """``9.0`` for ``compute_90``: the capability it is for, without its suffix."""
        return f"{self.major}.{self.minor}"


def parse_code_name(name: str) -> CodeName | None:
    """``sm_90a`` -> ``CodeName("sm", 9, 0, "a")``; None for anything else."""
    match = _CODE_NAME.fullmatch(name)
    if match is None:
        return None
    return CodeName(match[1], int(match[2]), int(match[3]), match[4])


def runs_on(name: str, gpu: tuple[int, int]) -> bool:
    """Whether the device code ``name`` runs on a GPU of capability ``gpu`` (the module
    docstring's rules); False for a name that is not one."""
    code = parse_code_name(name)
    return code is not None and _runs(code.kind == "sm", (code.major, code.minor), code.suffix, gpu)


def _runs(machine_code: bool, version: tuple[int, int], suffix: str, gpu: tuple[int, int]) -> bool:
    if suffix == "a":
        return version == gpu
    if machine_code or suffix == "f":
        return version[0] == gpu[0] and version[1] <= gpu[1]
    return version <= gpu


def _suffix(name: str) -> str:
    return name[-1] if name[-1:] in ("a", "f") else ""


def code_key(name: str) -> tuple[int, str, str]:
    """Sort key of ``sm_90a`` / ``compute_90``: by number, then suffix, then kind."""
    prefix, _, rest = name.partition("_")
    digits = rest.rstrip("af")
    return (int(digits) if digits.isdigit() else 0, rest[len(digits):], prefix)


def sort_code_names(names: Iterable[str]) -> tuple[str, ...]:
    """Device code names, each once, in :func:`code_key` order."""
    return tuple(sorted(set(names), key=code_key))


@dataclass(frozen=True)
class AmdTarget:
    """An AMD GPU target ID: ``gfx942:sramecc+:xnack-`` (features in the order given)."""

    processor: str
    features: tuple[tuple[str, bool], ...] = ()

    @property
    def name(self) -> str:
        return self.processor + "".join(f":{f}{'+' if on else '-'}" for f, on in self.features)


def parse_amd_target(text: str) -> AmdTarget | None:
    """``gfx942:sramecc+:xnack-`` -> AmdTarget; None for anything else (a feature twice too)."""
    match = _AMD_TARGET.fullmatch(text)
    if match is None:
        return None
    features = tuple((part[:-1], part[-1] == "+") for part in match[2].split(":")[1:])
    if len({name for name, _ in features}) != len(features):
        return None
    return AmdTarget(match[1], features)


def amd_runs_on(code_object: str, gpu: str) -> bool:
    """Whether a HIP code object for target ID ``code_object`` runs on the GPU ``gpu``
    (a target ID too): the same processor, and no feature stated by both that differs.
    A feature the GPU's ID leaves out (``--gpu-arch gfx942``) is taken to agree."""
    code, device = parse_amd_target(code_object), parse_amd_target(gpu)
    if code is None or device is None or code.processor != device.processor:
        return False
    stated = dict(device.features)
    return all(stated.get(name, on) == on for name, on in code.features)


def target_key(name: str) -> tuple[int, str]:
    """Sort key of target IDs: ``gfx906`` < ``gfx90a`` < ``gfx942`` < ``gfx1030``."""
    processor = name.split(":")[0]
    return len(processor), name


def sort_target_ids(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=target_key))


@dataclass(frozen=True)
class GpuCode:
    """The device code of one binary (or one wheel) that holds at least one kernel:
    nvcc's names (cubins, PTX) and HIP code objects' target IDs, each sorted by
    architecture."""

    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    code_objects: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.cubins and not self.ptx and not self.code_objects

    def union(self, other: GpuCode) -> GpuCode:
        return GpuCode(sort_code_names({*self.cubins, *other.cubins}),
                       sort_code_names({*self.ptx, *other.ptx}),
                       sort_target_ids({*self.code_objects, *other.code_objects}))

    def names(self) -> tuple[str, ...]:
        return (*self.cubins, *self.ptx, *self.code_objects)

    def describe(self) -> str:
        """``sm_80, sm_90, compute_90`` or ``gfx90a, gfx942`` (or ``no device code``)."""
        return ", ".join(self.names()) or "no device code"

    def to_dict(self) -> dict[str, list[str]]:
        """The record's form; ``code_objects`` only when there are some (so that a CUDA
        build's record reads as it always has)."""
        found = {"cubins": list(self.cubins), "ptx": list(self.ptx)}
        if self.code_objects:
            found["code_objects"] = list(self.code_objects)
        return found


@dataclass(frozen=True)
class ClaimVerdict:
    """What a claimed architecture (metadata.json's ``backend.archs``) finds in the code
    that holds kernels."""

    claim: str
    exact: bool  # the code it names is held, under that name
    runs_as: str | None = None  # else: held code that runs on the claimed GPU
    forward: bool = True  # ``+PTX``: PTX that the GPUs after it can compile is held

    @property
    def covered(self) -> bool:
        return self.exact or (self.runs_as is not None and self.forward)


def judge_claim(claim: str, code: GpuCode) -> ClaimVerdict | None:
    """``claim`` (a CUDA capability or an AMD target ID) against ``code``; None when it
    is neither, or a capability whose code nvcc cannot name (``10.10``)."""
    capability = parse_capability(claim)
    if capability is not None:
        return _judge_capability(claim, capability, code)
    target = parse_amd_target(claim)
    if target is None:
        return None
    if target.name in code.code_objects:
        return ClaimVerdict(claim, True)
    running = [name for name in code.code_objects if amd_runs_on(name, target.name)]
    return ClaimVerdict(claim, False, running[0] if running else None)


def _judge_capability(claim: str, capability: Capability, code: GpuCode) -> ClaimVerdict | None:
    promised = capability.code
    if promised is None:
        return None
    held = {*code.cubins, *code.ptx}
    if all(name in held for name in promised.names()):
        return ClaimVerdict(claim, True)
    gpu = capability.version
    running = [n for n in code.cubins if runs_on(n, gpu)] or [n for n in code.ptx if runs_on(n, gpu)]
    # PTX runs forward from the claimed GPU only as far as its own suffix lets it:
    # compute_XY on every later GPU, compute_XYf within the family, compute_XYa nowhere else.
    reach = {"": ("",), "f": ("", "f"), "a": ("", "f", "a")}[capability.suffix]
    forward = not capability.ptx or any(runs_on(name, gpu) and _suffix(name) in reach for name in code.ptx)
    return ClaimVerdict(claim, False, running[-1] if running else None, forward)
