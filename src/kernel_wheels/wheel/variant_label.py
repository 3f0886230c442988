"""Wheel variants (PEP 825 draft, with the providers of its companion draft, PEP 826):
the variant properties, label and ``variant.json`` of a kernel build.

Followed revision: the format ``variantlib`` 0.2.2 reads and writes (schema
``https://variants-schema.wheelnext.dev/v0.2.0.json``: ``$schema``,
``default-priorities.namespace``, ``providers``, ``variants``). ``docs/variants.md``
says what changes when the PEPs are final.

A build's properties say what its wheel needs, in the namespaces the drafts define and
one kernel-wheels proposes where they define none:

- ``abi_dependency :: torch :: 2.7`` (reserved by PEP 826, matched by ``variantlib``
  against the installed torch): the torch a torch build was compiled for; a stable-ABI
  build lists every torch 2.x from its own on; a tvm-ffi build names
  ``apache_tvm_ffi`` instead;
- ``nvidia :: cuda_version_lower_bound`` / ``cuda_version_upper_bound`` and
  ``nvidia :: sm_arch`` (the wheelnext NVIDIA provider's features): CUDA builds, the
  bounds from the variant name, the GPU architectures from metadata.json's
  ``backend.archs`` (``9.0+PTX`` -> ``90_real``, ``90_virtual``);
- ``torch_backend :: abi / backend / noarch`` (kernel-wheels' proposal; its provider is
  :mod:`kernel_wheels.distribution.variant_provider`): the torch build a kernel binary
  links, which is what the Hub's loader and ``kernel-wheels install`` match on: the
  kind of build (stable ABI, torch, tvm-ffi), the backend (``cu128``, ``rocm71``,
  ``xpu20253``, ``cpu``, ``metal``, ...) and, for Python-only builds, the backend they
  are for. No draft names a namespace for ROCm, XPU, Metal or CPU-only torch builds.

The noarch ``torch-universal`` build is the null variant. A build whose name carries the
old C++ ABI (``cxx98``), or a C++ ABI off Linux, gets no variant wheel: no namespace
says which C++ ABI torch was built with (and the Hub's loader never loads the latter).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..kernel.gpu_archs import parse_capability
from ..kernel.variants import Variant
from ..reading import parse_json

SCHEMA_URL = "https://variants-schema.wheelnext.dev/v0.2.0.json"
VARIANT_JSON = "variant.json"
NULL_LABEL = "null"
#: Namespaces in decreasing priority: the torch build decides, the GPU next.
NAMESPACES = ("torch_backend", "nvidia", "abi_dependency")
PROVIDERS: dict[str, dict[str, Any]] = {
    "torch_backend": {"requires": ["kernel-wheels"],
                      "plugin-api": "kernel_wheels.distribution.variant_provider:TorchBackendPlugin"},
    "nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
               "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"},
    # Installers match this namespace against the installed packages themselves (PEP 826);
    # variantlib 0.2.2 still wants every namespace declared, so it is declared optional:
    # never installed or loaded by default.
    "abi_dependency": {"requires": ["abi-dependency"], "optional": True},
}
LABEL = re.compile(r"[0-9a-z._]{1,16}")
_VALUE = re.compile(r"[a-z0-9_.]+")
#: A stable-ABI build fits every later torch 2.x; the ABI is not promised across majors.
_LAST_TORCH2_MINOR = 99

Properties = dict[str, dict[str, list[str]]]


@dataclass(frozen=True)
class VariantWheel:
    """The label and properties of one build's variant wheel."""

    label: str
    properties: Properties

    @property
    def is_null(self) -> bool:
        return not self.properties


@dataclass(frozen=True)
class NoVariantWheel:
    """Why a build gets no variant wheel (it keeps its plain wheel)."""

    reason: str


def variant_wheel(variant: Variant, archs: Iterable[str],
                  sm_arch: list[str] | None = None) -> VariantWheel | NoVariantWheel:
    """The variant wheel of ``variant`` (``archs``: metadata.json's ``backend.archs``;
    ``sm_arch``: the values the binaries' device code gives, which replace those)."""
    if variant.noarch:
        if variant.backend == "universal":
            return VariantWheel(NULL_LABEL, {})
        noarch = "npu" if variant.backend == "cann" else variant.backend
        return VariantWheel(f"py{noarch}", {"torch_backend": {"noarch": [noarch]}})
    if variant.cxx_abi == "cxx98":
        return NoVariantWheel("built for the old C++ ABI (cxx98), which no variant namespace expresses")
    if variant.cxx_abi is not None and variant.os != "linux":
        return NoVariantWheel(f"a C++ ABI part on {variant.os}, which the Hub's loader never loads")
    assert variant.framework_version is not None
    major, minor = variant.framework_version
    kind, abi_dependency = _framework(variant, major, minor)
    properties: Properties = {
        "torch_backend": {"abi": [f"{kind}{major}{minor}"], "backend": [variant.backend_tag]},
        "abi_dependency": abi_dependency,
    }
    if variant.backend == "cuda":
        properties["nvidia"] = _nvidia(variant, archs, sm_arch)
    short = {"torch": "t", "stable": "s", "tvmffi": "v"}[kind]
    label = f"{short}{major}{minor}{variant.backend_tag}"
    if "sm_arch" in properties.get("nvidia", {}):
        # Two builds with one name may target other GPUs (x86-64 and aarch64 builds):
        # the label must name one property set.
        label += "." + hashlib.sha256(" ".join(properties["nvidia"]["sm_arch"]).encode()).hexdigest()[:3]
    if not LABEL.fullmatch(label):
        return NoVariantWheel(f"its variant label {label!r} would not be 1-16 of [0-9a-z._]")
    return VariantWheel(label, properties)


def _framework(variant: Variant, major: int, minor: int) -> tuple[str, dict[str, list[str]]]:
    if variant.framework == "tvm-ffi":
        return "tvmffi", {"apache_tvm_ffi": [f"{major}.{minor}"]}
    if variant.framework == "torch-stable-abi":
        last = _LAST_TORCH2_MINOR if major == 2 else minor
        return "stable", {"torch": [f"{major}.{m}" for m in range(minor, last + 1)]}
    return "torch", {"torch": [f"{major}.{minor}"]}


def _nvidia(variant: Variant, archs: Iterable[str], sm_arch: list[str] | None) -> dict[str, list[str]]:
    assert variant.backend_version is not None
    cuda_major = int(variant.backend_version.split(".")[0])
    features = {"cuda_version_lower_bound": [variant.backend_version],
                "cuda_version_upper_bound": [str(cuda_major + 1)]}
    sm = sm_arch if sm_arch is not None else sm_arch_values(archs)
    if sm:
        features["sm_arch"] = sm
    return features


def sm_arch_values(archs: Iterable[str]) -> list[str]:
    """metadata.json's CUDA capabilities as ``sm_arch`` values: ``8.0`` -> ``80_real``,
    ``9.0+PTX`` -> ``90_real`` and ``90_virtual``. Any capability not of that form
    leaves the feature out (a wheel must not claim less than it runs on)."""
    cubins: list[str] = []
    ptx: list[str] = []
    for arch in archs:
        capability = parse_capability(arch.strip())
        code = capability.code if capability is not None else None
        if code is None:
            return []
        cubins += code.cubins
        ptx += code.ptx
    return sm_arch_of_code(cubins, ptx)


def sm_arch_of_code(cubins: Iterable[str], ptx: Iterable[str]) -> list[str]:
    """The binaries' device code as ``sm_arch`` values: ``sm_90a`` -> ``90a_real``,
    ``compute_90`` -> ``90_virtual``."""
    return sorted({*(c.removeprefix("sm_") + "_real" for c in cubins),
                   *(p.removeprefix("compute_") + "_virtual" for p in ptx)})


def variant_info(variants: Mapping[str, Properties]) -> dict[str, Any]:
    """A ``variant.json`` (one label) or ``-variants.json`` (every label) document."""
    for label, properties in variants.items():
        _check(label, properties)
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": list(NAMESPACES)},
        "providers": PROVIDERS,
        "variants": {label: variants[label] for label in sorted(variants)},
    }


def variant_json_text(variants: Mapping[str, Properties]) -> str:
    return json.dumps(variant_info(variants), indent=2, sort_keys=True) + "\n"


def _check(label: str, properties: Properties) -> None:
    if not LABEL.fullmatch(label) or (label == NULL_LABEL) != (not properties):
        raise UsageError(f"variant label {label[:40]!r} is not valid here")
    for namespace, features in properties.items():
        if namespace not in NAMESPACES or not all(
                _VALUE.fullmatch(f) and values and all(_VALUE.fullmatch(v) for v in values)
                for f, values in features.items()):
            raise UsageError(f"variant {label!r}: properties of {namespace[:40]!r} are not valid")


def merge_variant_files(label_and_texts: Iterable[tuple[str, str]]) -> dict[str, Properties]:
    """The ``variants`` of many ``variant.json`` texts, merged for ``-variants.json``.
    A label with two different property sets, or a file not written as kernel-wheels
    writes them, is a UsageError naming it."""
    merged: dict[str, Properties] = {}
    for where, text in label_and_texts:
        variants = read_variant_json(text, where)
        for label, properties in variants.items():
            if merged.setdefault(label, properties) != properties:
                raise UsageError(f"{where}: variant label {label!r} stands for other properties "
                                 "in another wheel of the same release")
    return merged


def read_variant_json(text: str, where: str) -> dict[str, Properties]:
    """The ``variants`` of a ``variant.json``, checked to be what kernel-wheels writes
    (same schema, priorities and providers); raises UsageError otherwise."""
    try:
        document = parse_json(text)
    except (ValueError, RecursionError):
        raise UsageError(f"{where}: variant.json is not valid JSON") from None
    if not isinstance(document, dict) or document.get("$schema") != SCHEMA_URL \
            or document.get("providers") != PROVIDERS \
            or document.get("default-priorities") != {"namespace": list(NAMESPACES)}:
        raise UsageError(f"{where}: variant.json is not one kernel-wheels writes "
                         f"(schema {SCHEMA_URL}, its providers and priorities)")
    variants = document.get("variants")
    if not isinstance(variants, dict) or not all(
            isinstance(p, dict) and all(isinstance(f, dict) and all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in f.values())
                for f in p.values()) for p in variants.values()):
        raise UsageError(f"{where}: variant.json's variants are not label: namespace: feature: values")
    for label, properties in variants.items():
        _check(str(label), properties)
    return variants


def split_variant_label(filename: str) -> tuple[str, str | None]:
    """``NAME-V-TAGS-LABEL.whl`` -> (``NAME-V-TAGS.whl``, ``LABEL``); a file name without
    a variant label comes back as it is, with None. A build tag (``NAME-V-1-TAGS.whl``)
    starts with a digit where a label's wheel has its Python tag."""
    if not filename.endswith(".whl"):
        return filename, None
    parts = filename[:-4].split("-")
    has_label = len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit())
    if not has_label or not LABEL.fullmatch(parts[-1]):
        return filename, None
    return "-".join(parts[:-1]) + ".whl", parts[-1]
