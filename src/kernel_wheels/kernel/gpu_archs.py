"""CUDA GPU architectures: their two spellings, their order, and which code runs on
which GPU.

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


def code_key(name: str) -> tuple[int, str, str]:
    """Sort key of ``sm_90a`` / ``compute_90``: by number, then suffix, then kind."""
    prefix, _, rest = name.partition("_")
    digits = rest.rstrip("af")
    return (int(digits) if digits.isdigit() else 0, rest[len(digits):], prefix)


def sort_code_names(names: Iterable[str]) -> tuple[str, ...]:
    """Device code names, each once, in :func:`code_key` order."""
    return tuple(sorted(set(names), key=code_key))


@dataclass(frozen=True)
class GpuCode:
    """The device code of one binary (or one wheel): nvcc's names, sorted by architecture."""

    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.cubins and not self.ptx

    def union(self, other: GpuCode) -> GpuCode:
        return GpuCode(sort_code_names({*self.cubins, *other.cubins}),
                       sort_code_names({*self.ptx, *other.ptx}))

    def describe(self) -> str:
        """``sm_80, sm_90, compute_90`` (or ``no device code``)."""
        return ", ".join((*self.cubins, *self.ptx)) or "no device code"

    def to_dict(self) -> dict[str, list[str]]:
        return {"cubins": list(self.cubins), "ptx": list(self.ptx)}
