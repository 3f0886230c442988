"""The wheel contract as code: a variant + a kernel version -> name, version, tags and
requirements of its wheel (``docs/wheel-contract.md``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import data
from ..errors import UsageError
from ..kernel.variants import Variant

#: ``--macos-version auto``: each macOS build's own version (:func:`macos_version_for`).
MACOS_AUTO = "auto"


@dataclass(frozen=True)
class TagOptions:
    """The user-adjustable defaults of the contract."""

    python_version: str = "3.9"
    manylinux_version: str = "2.28"
    #: ``auto`` (each macOS build as its backend and its binaries need) or one version
    #: for every build, such as ``15.0``.
    macos_version: str = MACOS_AUTO

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d+", self.python_version):
            raise UsageError(f"--python-version '{self.python_version}' is not like 3.9")
        if not re.fullmatch(r"\d+\.\d+", self.manylinux_version):
            raise UsageError(f"--manylinux-version '{self.manylinux_version}' is not like 2.28")
        if self.macos_version != MACOS_AUTO:
            _check_macos(self.macos_version)

    @property
    def macos_auto(self) -> bool:
        return self.macos_version == MACOS_AUTO


def _check_macos(version: str) -> None:
    if not re.fullmatch(r"\d{1,3}(\.\d{1,3})?", version):
        raise UsageError(f"--macos-version '{version}' is not like 15.0 (or auto)")
    major, minor = _macos_pair(version)
    if major >= 11 and minor:
        # pip (packaging.tags.mac_platforms) accepts macosx_<N>_0 only from macOS 11 on:
        # a macosx_15_4 wheel would install nowhere.
        raise UsageError(f"--macos-version '{version}': wheel tags name macOS 11 and later by "
                         f"major release only ({major}.0 or {major + 1}.0)")


def _macos_pair(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class WheelPlan:
    distribution: str  # as written in the file name (underscores)
    project_name: str  # METADATA Name
    version: str  # normalised, with the local label
    tags: tuple[Tag, ...]
    requires_python: str
    torch_requirement: str
    root_is_purelib: bool
    #: A variant wheel's label (PEP 825 draft, ``wheel/variant_label.py``): the file name
    #: ends in ``-<label>.whl`` and the version has no local label.
    variant_label: str | None = None

    @property
    def tag_string(self) -> str:
        return ".".join(sorted({t.interpreter for t in self.tags})) + "-" + \
            ".".join(sorted({t.abi for t in self.tags})) + "-" + \
            ".".join(sorted({t.platform for t in self.tags}))

    @property
    def filename(self) -> str:
        label = f"-{self.variant_label}" if self.variant_label else ""
        return f"{self.distribution}-{self.version}-{self.tag_string}{label}.whl"

    @property
    def dist_info(self) -> str:
        return f"{self.distribution}-{self.version}.dist-info"


def tag_options_of(variant: Variant, tags: Iterable[Tag]) -> TagOptions:
    """The tag options a wheel's own tags give (what ``check`` plans the wheel with to
    compare its name): the Python version of a ``cpXY`` tag, the manylinux or macOS
    version of its platform tag; the defaults where a tag says nothing."""
    options = TagOptions()
    if variant.noarch:
        return options
    for tag in tags:
        if (python := re.fullmatch(r"cp3(\d+)", tag.interpreter)) is not None:
            options = replace(options, python_version=f"3.{python[1]}")
        if (linux := re.fullmatch(r"manylinux_(\d+)_(\d+)_.+", tag.platform)) is not None:
            options = replace(options, manylinux_version=f"{linux[1]}.{linux[2]}")
        if (macos := re.fullmatch(r"macosx_(\d+)_(\d+)_.+", tag.platform)) is not None:
            options = replace(options, macos_version=f"{macos[1]}.{macos[2]}")
    return options


def platform_tag(variant: Variant, options: TagOptions) -> str:
    """The variant's platform tag; with ``--macos-version auto`` a macOS build gets its
    backend's version here (what kernel-builder builds it for), and the converter tags
    it again from its binaries once they have arrived (convert/produce.py)."""
    table = data.load("variants")
    assert variant.os is not None and variant.cpu_arch is not None
    macos = macos_version_for(variant) if options.macos_auto else options.macos_version
    return str(table["platform_tags"][variant.os].format(
        manylinux=options.manylinux_version.replace(".", "_"),
        macos="{}_{}".format(*_macos_pair(macos)),
        arch=variant.cpu_arch,
        macos_arch=table["macos_arch"][variant.cpu_arch],
        windows_arch=table["windows_arch"][variant.cpu_arch],
    ))


def macos_version_for(variant: Variant, needed: tuple[int, int] | None = None) -> str:
    """``--macos-version auto`` for one macOS build: the version its binaries need
    (``needed``, the highest minimum any of them records) as a tag can name it, never
    below what the ``kernels`` loader needs to run its backend (Metal: 26.0); with no
    recorded minimum, the version kernel-builder builds the backend for (CPU and
    tvm-ffi 15.0, Metal 26.0; data/variants.json)."""
    table = data.load("variants")["macos_auto"]
    if needed is None:
        version = _macos_pair(table["target"].get(variant.backend, table["target"]["*"]))
    else:
        version = max(macos_release(needed), _macos_pair(table["floor"].get(variant.backend, "0")))
    if variant.cpu_arch == "aarch64":
        version = max(version, (11, 0))  # no arm64 Mac runs anything older
    return f"{version[0]}.{version[1]}"


def macos_release(version: tuple[int, int]) -> tuple[int, int]:
    """The oldest macOS release a tag can name that has ``version``: 10.x keeps its
    minor; from 11 on a tag names a major release (pip accepts only ``macosx_<N>_0``
    there), so a binary that needs 15.4 needs a ``macosx_16_0`` tag: ``macosx_15_0``
    would let macOS 15.0-15.3 install it."""
    major, minor = version
    if major >= 11 and minor:
        return major + 1, 0
    return major, minor


def torch_requirement(variant: Variant) -> str:
    if variant.noarch:
        return "torch"
    if variant.framework == "tvm-ffi":
        return f"apache-tvm-ffi=={variant.framework_version_str}.*"
    if variant.framework == "torch-stable-abi":
        return f"torch>={variant.framework_version_str}"
    return f"torch=={variant.framework_version_str}.*"


def names_package(project: str, module: str) -> bool:
    """Whether a project may carry the package ``module``: a kernel wheel's project is
    named after the package it installs (``flash-attn`` for ``flash_attn``), or a prefixed
    form of it (``acme-flash-attn``, to keep clear of a public project of that name). A
    project named ``img2gray`` installing ``numpy/`` is not a kernel wheel but a trap."""
    wanted = canonicalize_name(module)
    given = canonicalize_name(project)
    return given == wanted or given.endswith("-" + wanted)


def check_distribution_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
        raise UsageError(f"'{name}' is not a valid distribution name")
    return name


def plan_wheel(variant: Variant, kernel_name: str, version: str, options: TagOptions,
               dist_name: str | None = None, variant_label: str | None = None) -> WheelPlan:
    """``variant_label``: plan the build's variant wheel instead, whose version is the
    release's alone (every build of a release shares it; the label tells them apart)."""
    project = check_distribution_name(dist_name or kernel_name)
    label = None if variant_label else variant.local_label
    full = Version(f"{version}+{label}" if label else version)
    if variant.noarch:
        tags: tuple[Tag, ...] = (Tag("py3", "none", "any"),)
    else:
        python = "cp" + options.python_version.replace(".", "")
        tags = (Tag(python, "abi3", platform_tag(variant, options)),)
    return WheelPlan(
        distribution=canonicalize_name(project).replace("-", "_"),
        project_name=project,
        version=str(full),
        tags=tags,
        requires_python=f">={options.python_version}",
        torch_requirement=torch_requirement(variant),
        root_is_purelib=variant.noarch,
        variant_label=variant_label,
    )
