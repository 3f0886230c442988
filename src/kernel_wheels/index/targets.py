"""Build targets: which kernel builds a machine can use, and which one it should get.

A *target key* is a variant name without its ``-<cpu-arch>-<os>`` suffix:
``torch27-cxx11-cu128``, ``torch213-cxx11-cpu``, ``torch213-metal`` (macOS),
``torch213-cu130`` (a Windows build without an ABI part). CPU architecture and OS are
left to the wheels' platform tags, which every installer already understands.

What a target accepts and prefers follows the Hub's own loader (``kernels``,
``kernels/variants.py``: ``_check_variants`` and ``_sort_variants``, checked against
kernels 0.17.2 and the repository's main branch):

- torch builds: the same torch major.minor; a build's C++ ABI part must equal the
  target's when the build has one (a build without one fits any ABI);
- ``torch-stable-abi<XY>`` builds: torch X.Y or later;
- ``tvm-ffi<XY>`` builds: only an environment with that apache-tvm-ffi version (torch
  targets never list them: their key says nothing about tvm-ffi);
- backend: CUDA of the same major and not newer (cu128 fits a cu129 target); every
  other backend exactly (rocm71, xpu20253, cpu, metal);
- Python-only builds: ``torch-<backend>`` for the target's backend (``torch-npu`` for
  CANN), and ``torch-universal`` everywhere.

Preference (best first): stable-ABI builds (newest stable ABI first), then torch builds
(a build without an ABI part before one with), then tvm-ffi builds, each with the
newest fitting backend version first; then the backend's Python-only build;
``torch-universal`` last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

from .. import data
from ..errors import UsageError, VariantError
from ..kernel.variants import Variant, parse_variant


@dataclass(frozen=True)
class Target:
    """A build target: torch version, C++ ABI (Linux only) and backend."""

    key: str
    torch: tuple[int, int]
    #: ``cxx11``/``cxx98``; None where the key has no ABI part (macOS, Windows).
    cxx_abi: str | None
    #: ``cuda``, ``rocm``, ``xpu``, ``cpu``, ``metal``, ...
    backend: str
    #: As spelled in the key: ``cu128``, ``rocm71``, ``cpu``.
    backend_tag: str
    #: (12, 8) for cu128; None for unversioned backends.
    backend_version: tuple[int, int] | None

    def describe(self) -> str:
        abi = f", {self.cxx_abi}" if self.cxx_abi else ""
        return f"torch {self.torch[0]}.{self.torch[1]} ({self.backend_tag}{abi})"


def _version_pair(dotted: str | None) -> tuple[int, int] | None:
    if dotted is None:
        return None
    major, _, minor = dotted.partition(".")
    return int(major), int(minor or 0)


def target_key_of(variant: Variant) -> str | None:
    """The target key a torch arch variant was built for; None for the others
    (Python-only, stable-ABI and tvm-ffi builds fit many targets and name none)."""
    if variant.noarch or variant.framework != "torch":
        return None
    return variant.name[: -len(f"-{variant.cpu_arch}-{variant.os}")]


def parse_target_key(key: str) -> Target:
    """``torch27-cxx11-cu128`` -> :class:`Target`; a UsageError for anything else."""
    try:
        # The variant grammar is the one source of truth: lend the key an arch and OS.
        variant = parse_variant(f"{key}-x86_64-linux")
    except VariantError:
        variant = None
    if variant is None or variant.framework != "torch" or variant.framework_version is None:
        raise UsageError(f"'{key}' is not a target key (like torch27-cxx11-cu128, "
                         "torch213-cxx11-cpu or torch213-metal)")
    return Target(key, variant.framework_version, variant.cxx_abi, variant.backend,
                  variant.backend_tag, _version_pair(variant.backend_version))


def target_of_variant(variant: Variant) -> Target | None:
    key = target_key_of(variant)
    return parse_target_key(key) if key else None


def rejection(target: Target, variant: Variant,
              tvm_ffi: tuple[int, int] | None = None) -> str | None:
    """Why ``target`` cannot use ``variant`` (None: it can). The reasons are the
    loader's, worded for people."""
    if variant.noarch:
        wanted = "npu" if target.backend == "cann" else target.backend
        if variant.backend not in ("universal", wanted):
            return f"Python-only build for {variant.backend}, not {wanted}"
        return None
    assert variant.framework_version is not None
    built = f"{variant.framework_version[0]}.{variant.framework_version[1]}"
    have = f"{target.torch[0]}.{target.torch[1]}"
    if variant.framework == "torch":
        if variant.framework_version != target.torch:
            return f"built for torch {built}, not {have}"
        if variant.cxx_abi is not None and variant.cxx_abi != target.cxx_abi:
            return f"built for the {variant.cxx_abi} C++ ABI, not {target.cxx_abi or 'none'}"
    elif variant.framework == "torch-stable-abi":
        if variant.framework_version > target.torch:
            return f"stable-ABI build needs torch >= {built}, not {have}"
    elif variant.framework_version != tvm_ffi:
        if tvm_ffi is None:
            return f"built for apache-tvm-ffi {built}, which is not installed"
        return f"built for apache-tvm-ffi {built}, not {tvm_ffi[0]}.{tvm_ffi[1]}"
    if target.backend == "cuda" and variant.backend == "cuda":
        built_cuda = _version_pair(variant.backend_version)
        assert built_cuda is not None and target.backend_version is not None
        if built_cuda[0] != target.backend_version[0] or built_cuda[1] > target.backend_version[1]:
            return (f"built for CUDA {variant.backend_version}, not usable with CUDA "
                    f"{target.backend_version[0]}.{target.backend_version[1]}")
    elif variant.backend_tag != target.backend_tag:
        return f"built for {variant.backend_tag}, not {target.backend_tag}"
    return None


def preference(variant: Variant) -> tuple[int, ...]:
    """Sort key of accepted builds, best first (the loader's ``_sort_variants``)."""
    if variant.noarch:
        return (3, 0, 0, 1 if variant.backend == "universal" else 0, 0, 0)
    assert variant.framework_version is not None
    backend = _version_pair(variant.backend_version) or (0, 0)
    newest_backend = (-backend[0], -backend[1])
    if variant.framework == "torch-stable-abi":
        return (0, -variant.framework_version[0], -variant.framework_version[1], 0,
                *newest_backend)
    if variant.framework == "torch":
        return (1, 0, 0, 0 if variant.cxx_abi is None else 1, *newest_backend)
    return (2, 0, 0, 0, *newest_backend)


# --- wheels, as their file names describe them --------------------------------------


@dataclass(frozen=True)
class KernelWheel:
    """What a wheel's file name says: project, version and, for kernel-wheels builds,
    the variant (rebuilt from the local version label and the platform tag)."""

    filename: str
    project: NormalizedName
    version: Version
    tags: frozenset[Tag]
    #: None for a wheel whose version carries no kernel build label (an ordinary
    #: wheel, e.g. a dependency): every target lists it as it is.
    variant: Variant | None

    @property
    def release(self) -> Version:
        return Version(self.version.public)

    @property
    def platforms(self) -> frozenset[str]:
        return frozenset(t.platform for t in self.tags)

    @property
    def machine(self) -> tuple[str, str] | None:
        """(os, cpu arch) of the wheel's platform tags; None for ``any``."""
        for platform in sorted(self.platforms):
            found = platform_machine(platform)
            if found:
                return found
        return None


_LINUX = re.compile(r"(?:many|musl)?linux(?:_\d+_\d+|\d+)?_(?P<arch>x86_64|aarch64)")
_MACOS = re.compile(r"macosx_\d+_\d+_(?P<arch>arm64|x86_64|universal2)")


def platform_machine(platform: str) -> tuple[str, str] | None:
    """``manylinux_2_28_x86_64`` -> (linux, x86_64); ``win_amd64`` -> (windows, x86_64)."""
    if match := _LINUX.fullmatch(platform):
        return "linux", match["arch"]
    if match := _MACOS.fullmatch(platform):
        return "darwin", {"arm64": "aarch64"}.get(match["arch"], match["arch"])
    windows = {"win_amd64": "x86_64", "win_arm64": "aarch64"}
    if platform in windows:
        return "windows", windows[platform]
    return None


@lru_cache(maxsize=1)
def _label_pattern() -> re.Pattern[str]:
    backends = "|".join(sorted(data.load("variants")["backends"], key=len, reverse=True))
    return re.compile(rf"(?P<framework>torch\d\d+|torchstableabi\d\d+|tvmffi\d\d+)"
                      rf"(?P<backend>(?:{backends})\d*)(?P<cxx>cxx11|cxx98)?")


def variant_from_version(version: Version, tags: frozenset[Tag]) -> Variant | None:
    """The variant of a kernel-wheels wheel from its version's local label and its
    tags (the inverse of the wheel contract); None when it is not one."""
    label = version.local
    noarch = all(t.platform == "any" for t in tags)
    if noarch:
        if label is None:
            return parse_variant("torch-universal")
        if label in data.load("variants")["noarch_backends"]:
            return parse_variant(f"torch-{label}")
        return None
    match = _label_pattern().fullmatch(label or "")
    machine = next((m for p in sorted(t.platform for t in tags) if (m := platform_machine(p))),
                   None)
    if match is None or machine is None:
        return None
    framework = match["framework"].replace("torchstableabi", "torch-stable-abi") \
        .replace("tvmffi", "tvm-ffi")
    parts = [framework, *([match["cxx"]] if match["cxx"] else []), match["backend"],
             machine[1], machine[0]]
    try:
        variant = parse_variant("-".join(parts))
    except VariantError:
        return None
    return variant if variant.local_label == label else None


@lru_cache(maxsize=1 << 16)
def parse_kernel_wheel(filename: str) -> KernelWheel | None:
    """None when ``filename`` is not a valid wheel file name."""
    try:
        project, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return KernelWheel(filename, project, version, tags, variant_from_version(version, tags))


# --- what a target's index lists ------------------------------------------------------


def _may_share_a_machine(a: KernelWheel, b: KernelWheel) -> bool:
    first, second = a.machine, b.machine
    return first is None or second is None or first == second


def select_for_target(target: Target, wheels: Iterable[KernelWheel]) -> list[KernelWheel]:
    """The wheels ``target``'s index lists: per project, release and platform tag, the
    one build the loader would pick; wheels without a build label, as they are.

    An installer picks the highest version first and looks at tags only among equal
    versions, so two listed builds of one release that a machine could both install
    must sort (by their local labels) in the loader's order. Where they would not (a
    Python-only ``+xpu`` build sorts above ``+torch213xpu20260cxx11``), the less
    preferred one is left out; ``kernel-wheels install`` still finds it on the root
    index.
    """
    groups: dict[tuple[str, Version, frozenset[str]], list[KernelWheel]] = {}
    chosen: list[KernelWheel] = []
    for wheel in wheels:
        if wheel.variant is None:
            chosen.append(wheel)
        elif rejection(target, wheel.variant) is None:
            groups.setdefault((wheel.project, wheel.release, wheel.platforms), []).append(wheel)
    best_by_release: dict[tuple[str, Version], list[KernelWheel]] = {}
    for (project, release, _), candidates in groups.items():
        best = min(candidates, key=lambda w: (preference(_variant(w)), w.filename))
        best_by_release.setdefault((project, release), []).append(best)
    for builds in best_by_release.values():
        kept: list[KernelWheel] = []
        for wheel in sorted(builds, key=lambda w: (preference(_variant(w)), w.filename)):
            if not any(_may_share_a_machine(wheel, better) and wheel.version > better.version
                       for better in kept):
                kept.append(wheel)
        chosen.extend(kept)
    return sorted(chosen, key=lambda w: (w.project, w.version, w.filename))


def _variant(wheel: KernelWheel) -> Variant:
    assert wheel.variant is not None
    return wheel.variant


def targets_of(wheels: Iterable[KernelWheel]) -> set[str]:
    """The target keys the torch arch builds among ``wheels`` were made for."""
    return {key for w in wheels if w.variant and (key := target_key_of(w.variant))}
