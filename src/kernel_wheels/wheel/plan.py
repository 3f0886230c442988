"""The wheel contract as code: a variant + a kernel version -> name, version, tags and
requirements of its wheel (``docs/wheel-contract.md``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import data
from ..errors import UsageError
from ..kernel.variants import Variant


@dataclass(frozen=True)
class TagOptions:
    """The user-adjustable defaults of the contract."""

    python_version: str = "3.9"
    manylinux_version: str = "2.28"
    macos_version: str = "26.0"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d+", self.python_version):
            raise UsageError(f"--python-version '{self.python_version}' is not like 3.9")
        if not re.fullmatch(r"\d+\.\d+", self.manylinux_version):
            raise UsageError(f"--manylinux-version '{self.manylinux_version}' is not like 2.28")
        if not re.fullmatch(r"\d+(\.\d+)?", self.macos_version):
            raise UsageError(f"--macos-version '{self.macos_version}' is not like 26.0")


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


def platform_tag(variant: Variant, options: TagOptions) -> str:
    table = data.load("variants")
    assert variant.os is not None and variant.cpu_arch is not None
    return str(table["platform_tags"][variant.os].format(
        manylinux=options.manylinux_version.replace(".", "_"),
        macos=_macos(options.macos_version),
        arch=variant.cpu_arch,
        macos_arch=table["macos_arch"][variant.cpu_arch],
        windows_arch=table["windows_arch"][variant.cpu_arch],
    ))


def _macos(version: str) -> str:
    major, _, minor = version.partition(".")
    return f"{major}_{minor or 0}"


def torch_requirement(variant: Variant) -> str:
    if variant.noarch:
        return "torch"
    if variant.framework == "tvm-ffi":
        return f"apache-tvm-ffi=={variant.framework_version_str}.*"
    if variant.framework == "torch-stable-abi":
        return f"torch>={variant.framework_version_str}"
    return f"torch=={variant.framework_version_str}.*"


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
