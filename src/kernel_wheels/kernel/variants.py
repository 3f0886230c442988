"""The build-variant grammar: ``torch27-cxx11-cu128-x86_64-linux`` -> :class:`Variant`.

Arch variants are ``<framework>-<backend>-<cpu-arch>-<os>``; Python-only (noarch)
variants are ``torch-<backend>`` and the legacy ``torch-universal``. The pieces
(backends, architectures, systems) are data in ``data/variants.json``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .. import data
from ..errors import VariantError

_FRAMEWORK = (
    r"(?:torch(?P<torch>\d\d+)(?:-(?P<cxx>cxx11|cxx98))?"
    r"|torch-stable-abi(?P<stable>\d\d+)"
    r"|tvm-ffi(?P<tvm>\d\d+))"
)


@dataclass(frozen=True)
class Variant:
    """One parsed build variant (one folder under ``build/``)."""

    name: str
    #: ``torch``, ``torch-stable-abi`` or ``tvm-ffi``; ``torch`` for noarch variants.
    framework: str
    #: (major, minor) of torch or tvm-ffi; None for noarch variants.
    framework_version: tuple[int, int] | None
    #: ``cxx11``/``cxx98`` when the name carries a C++ ABI part.
    cxx_abi: str | None
    #: ``cuda``, ``rocm``, ``xpu``, ``cann``, ``cpu``, ``metal``, ... or ``universal``.
    backend: str
    #: The backend as spelled in the name: ``cu128``, ``rocm71``, ``cpu``.
    backend_tag: str
    #: Dotted backend version (``12.8``, ``7.1``, ``2025.3``); None when unversioned.
    backend_version: str | None
    cpu_arch: str | None
    os: str | None

    @property
    def noarch(self) -> bool:
        return self.cpu_arch is None

    @property
    def framework_version_str(self) -> str | None:
        if self.framework_version is None:
            return None
        return f"{self.framework_version[0]}.{self.framework_version[1]}"

    @property
    def local_label(self) -> str | None:
        """The PEP 440 local label of this variant's wheels, per the wheel contract.

        ``torch27-cxx11-cu128-x86_64-linux`` -> ``torch27cu128cxx11`` (the form the old
        ``kernels to-wheel`` wrote), ``torch-cuda`` -> ``cuda``, ``torch-universal`` -> None.
        """
        if self.noarch:
            return None if self.backend == "universal" else self.backend
        framework = re.sub(r"[^a-z0-9]", "", self.name.split("-" + self.backend_tag + "-")[0])
        framework = framework.replace("cxx11", "").replace("cxx98", "")
        return f"{framework}{self.backend_tag}{self.cxx_abi or ''}"

    def to_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["framework_version"] = self.framework_version_str
        result["noarch"] = self.noarch
        return result


def _split_version(digits: str, scheme: str) -> str:
    if scheme == "major2_minor1":  # cu118 -> 11.8, cu130 -> 13.0
        return f"{int(digits[:2])}.{digits[2:]}"
    if scheme == "year4_minor":  # xpu20253 -> 2025.3
        return f"{digits[:4]}.{digits[4:]}"
    return f"{digits[0]}.{digits[1:]}"  # rocm71 -> 7.1


def _major_minor(digits: str) -> tuple[int, int]:
    # The major version is one digit and the minor one or more: torch210 is 2.10, not 21.0.
    return int(digits[0]), int(digits[1:])


def parse_variant(name: str) -> Variant:
    """Parse a variant folder name; raise :class:`VariantError` if it is not one."""
    table = data.load("variants")
    if name == "torch-universal":
        return Variant(name, "torch", None, None, "universal", "universal", None, None, None)
    noarch = re.fullmatch(r"torch-([a-z]+)", name)
    if noarch and noarch.group(1) in table["noarch_backends"]:
        backend = noarch.group(1)
        return Variant(name, "torch", None, None, backend, backend, None, None, None)

    backends = "|".join(sorted(table["backends"], key=len, reverse=True))
    pattern = (
        rf"{_FRAMEWORK}-(?P<backend>{backends})(?P<bver>\d*)"
        rf"-(?P<arch>{'|'.join(table['cpu_archs'])})-(?P<os>{'|'.join(table['operating_systems'])})"
    )
    match = re.fullmatch(pattern, name)
    if match is None:
        raise VariantError(f"'{name}' is not a build variant name")
    spec = table["backends"][match["backend"]]
    bver = match["bver"]
    if ("version_digits" in spec) != bool(bver) or (bver and len(bver) < 2):
        raise VariantError(f"'{name}': backend '{match['backend']}{bver}' has a malformed version")
    if match["torch"]:
        framework, version = "torch", _major_minor(match["torch"])
    elif match["stable"]:
        framework, version = "torch-stable-abi", _major_minor(match["stable"])
    else:
        framework, version = "tvm-ffi", _major_minor(match["tvm"])
    return Variant(
        name=name,
        framework=framework,
        framework_version=version,
        cxx_abi=match["cxx"],
        backend=spec["type"],
        backend_tag=match["backend"] + bver,
        backend_version=_split_version(bver, spec["version_digits"]) if bver else None,
        cpu_arch=match["arch"],
        os=match["os"],
    )


def try_parse_variant(name: str) -> Variant | None:
    try:
        return parse_variant(name)
    except VariantError:
        return None
