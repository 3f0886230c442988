"""The GPUs a CUDA wheel runs on, proved from its binaries' fat binaries
(:mod:`kernel_wheels.elf.fatbin`): each binary's ``sm_XY`` cubins and ``compute_XY``
PTX, the wheel's union, and whether that holds every capability metadata.json's
``backend.archs`` claims (kernel-builder's spelling: ``8.0`` is an sm_80 cubin,
``9.0+PTX`` an sm_90 cubin and compute_90 PTX, ``9.0a`` an sm_90a cubin). A CUDA build
without any device code fails: it would load and then fail at its first call with "no
kernel image is available for execution on the device". Other backends: nothing to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..kernel.gpu_archs import EXAMPLES, GpuCode, parse_capability
from ..wheel.gpu_record import GPU_RECORD, record_document
from ..wheel.variant_label import VARIANT_JSON, read_variant_json, sm_arch_of_code
from .facts import WheelContents
from .report import Finding, Status

if TYPE_CHECKING:  # types only: the reader is imported where a binary is read
    from ..elf.reader import ElfInfo

_CUDA_LOCAL = re.compile(r"\+[a-z0-9.]*cu\d+")


@dataclass(frozen=True)
class WheelGpuCode:
    """The device code of a wheel: per binary (those with a fat binary) and together."""

    binaries: tuple[tuple[str, GpuCode], ...]

    @property
    def wheel(self) -> GpuCode:
        total = GpuCode()
        for _, code in self.binaries:
            total = total.union(code)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {**self.wheel.to_dict(),
                "binaries": {name: code.to_dict() for name, code in self.binaries}}


def wheel_gpu_code(infos: Sequence[ElfInfo]) -> WheelGpuCode:
    return WheelGpuCode(tuple(sorted((i.arcname, i.gpu_code) for i in infos if i.gpu_code is not None)))


def claimed_code(arch: str) -> GpuCode | None:
    """What a metadata.json capability promises (None: not a capability, or one whose
    code nvcc cannot name, such as ``10.10``)."""
    capability = parse_capability(arch)
    return capability.code if capability is not None else None


def is_cuda_wheel(facts: WheelContents) -> bool:
    """A compiled CUDA build: the build variant its provenance names (or else its local
    version, ``+torch214cu130cxx11``) is one."""
    variant = (facts.provenance or {}).get("variant")
    if isinstance(variant, dict):
        return variant.get("backend") == "cuda" and variant.get("noarch") is False
    version = facts.filename.split("-")[1] if facts.filename.count("-") >= 4 else ""
    return _CUDA_LOCAL.search(version) is not None


def check_gpu_code(facts: WheelContents, infos: Sequence[ElfInfo]) -> tuple[list[Finding], WheelGpuCode]:
    code = wheel_gpu_code(infos)
    findings = [Finding("gpu", Status.PASS, f"{name}: {held.describe()}") for name, held in code.binaries]
    findings += _record_findings(facts, code)
    if not is_cuda_wheel(facts):
        return findings, code
    if not infos:
        if facts.binaries:  # Windows and macOS binaries: their fat binaries are not read
            findings.append(Finding("gpu", Status.NOT_VERIFIED, "the CUDA device code of binaries "
                                                                "other than Linux ELF is not read"))
        return findings, code
    total = code.wheel
    if total.empty:
        findings.append(Finding("gpu", Status.FAIL, "a CUDA build with no CUDA device code in any "
                                                    "binary: it runs on no GPU"))
        return findings, code
    missing = []
    for arch in _claimed_archs(facts):
        promised = claimed_code(arch) if isinstance(arch, str) else None
        if promised is None:
            findings.append(Finding("gpu", Status.FAIL, f"metadata.json's backend.archs holds "
                                                        f"{_shown(arch)}, which is not a CUDA "
                                                        f"capability such as {EXAMPLES}"))
            continue
        lacking = [n for n in (*promised.cubins, *promised.ptx) if n not in (*total.cubins, *total.ptx)]
        if lacking:
            missing.append(f"{arch} ({', '.join(lacking)})")
    findings += _variant_findings(facts, total)
    if missing:
        findings.append(Finding("gpu", Status.FAIL, f"metadata.json's backend.archs claims "
                                                    f"{'; '.join(missing)}, which no binary holds "
                                                    f"(they hold {total.describe()})"))
    elif not any(f.status is Status.FAIL for f in findings):
        findings.append(Finding("gpu", Status.PASS, f"the wheel runs on GPUs with "
                                                    f"{total.describe()}"))
    return findings, code


def _claimed_archs(facts: WheelContents) -> list[object]:
    provenance = facts.provenance or {}
    meta = provenance.get("metadata_json")
    backend = meta.get("backend") if isinstance(meta, dict) else None
    archs = backend.get("archs") if isinstance(backend, dict) else None
    return list(archs) if isinstance(archs, list) else []


def _record_findings(facts: WheelContents, code: WheelGpuCode) -> list[Finding]:
    """The dist-info record (what indexes and install read) against the binaries."""
    text = facts.texts.get(GPU_RECORD)
    if text is None:
        return []
    try:
        said = json.loads(text)
    except json.JSONDecodeError:
        said = None
    if said != record_document(code.binaries):
        return [Finding("gpu", Status.FAIL, f"{GPU_RECORD} does not say what the binaries hold "
                                            f"({code.wheel.describe()})")]
    return [Finding("gpu", Status.PASS, f"{GPU_RECORD} says what the binaries hold")]


def _variant_findings(facts: WheelContents, total: GpuCode) -> list[Finding]:
    """A variant wheel's ``nvidia :: sm_arch`` (what installers choose by) against the
    binaries (variant.json's own form is ``variants``' check)."""
    text = facts.texts.get(VARIANT_JSON)
    if text is None:
        return []
    try:
        variants = read_variant_json(text, VARIANT_JSON)
    except UsageError:
        return []
    said = sorted({v for properties in variants.values()
                   for v in properties.get("nvidia", {}).get("sm_arch", [])})
    held = sm_arch_of_code(total.cubins, total.ptx)
    if said != held:
        return [Finding("gpu", Status.FAIL, f"{VARIANT_JSON} says nvidia :: sm_arch "
                                            f"{', '.join(said) or 'nothing'}, but the binaries hold "
                                            f"{', '.join(held)}")]
    return []


def _shown(value: object) -> str:
    return json.dumps(value)[:80]


__all__ = ["WheelGpuCode", "check_gpu_code", "claimed_code", "is_cuda_wheel", "wheel_gpu_code"]
