"""The GPUs a CUDA or ROCm wheel runs on, proved from its binaries: each binary's cubins,
PTX (:mod:`kernel_wheels.elf.fatbin`) and HIP code objects
(:mod:`kernel_wheels.elf.offload_bundle`) that hold a kernel, and the wheel's union. An
architecture counts only where some code for it holds a kernel: nvcc writes a cubin per
``-gencode`` even for a ``.cu`` file of host code only.

metadata.json's ``backend.archs`` (kernel-builder's spelling: ``8.0``, ``9.0a``,
``9.0+PTX``, ``10.0f``; ``gfx90a`` for ROCm) is judged by what runs where
(:func:`kernel_wheels.kernel.gpu_archs.judge_claim`):

- held under its own name (``8.0``: an ``sm_80`` cubin with a kernel): nothing to say;
- held under another name that runs there (``9.0a`` claimed, ``sm_90`` held; ``8.9``
  claimed, ``sm_80`` held): a note (``info``), not a failure;
- held nowhere, while other claims are: ``not verified``. kernel-builder adds every
  component's capabilities to ``archs``, also those of a component that compiles no
  kernel for them (headers only, host code only), so such a claim is the builder's, and
  the wheel is recorded, indexed and installed for what its kernels run on;
- none of the claims held: a failure, as is a GPU build with no kernel in any binary (it
  loads, then fails at its first call with "no kernel image is available").

Other backends: nothing to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..kernel.gpu_archs import EXAMPLES, ClaimVerdict, GpuCode, judge_claim
from ..reading import parse_json
from ..wheel.gpu_record import GPU_RECORD, record_document
from ..wheel.variant_label import VARIANT_JSON, read_variant_json, sm_arch_of_code
from .facts import WheelContents
from .report import Finding, Status

if TYPE_CHECKING:  # types only: the reader is imported where a binary is read
    from ..elf.reader import ElfInfo

_GPU_LOCAL = re.compile(r"\+[a-z0-9.]*?(cu|rocm)\d+")
_BACKENDS = {"cu": "cuda", "rocm": "rocm"}
#: How each GPU backend's code and claims are named in messages.
_WORDS = {"cuda": ("CUDA", "cubin or PTX", f"a CUDA capability such as {EXAMPLES}"),
          "rocm": ("ROCm", "HIP code object", "an AMD GPU target such as gfx90a or gfx942")}


@dataclass(frozen=True)
class WheelGpuCode:
    """The device code of a wheel: per binary (those with device code sections) and
    together; only code that holds a kernel counts."""

    binaries: tuple[tuple[str, GpuCode], ...]
    #: Per binary, the code it holds without a kernel (named in messages only).
    kernel_less: tuple[tuple[str, GpuCode], ...] = ()

    @property
    def wheel(self) -> GpuCode:
        total = GpuCode()
        for _, code in self.binaries:
            total = total.union(code)
        return total

    @property
    def idle(self) -> GpuCode:
        """Code held somewhere without a kernel, and nowhere with one."""
        total = GpuCode()
        for _, code in self.kernel_less:
            total = total.union(code)
        held = set(self.wheel.names())
        return GpuCode(*(tuple(n for n in names if n not in held)
                         for names in (total.cubins, total.ptx, total.code_objects)))

    def to_dict(self) -> dict[str, Any]:
        return {**self.wheel.to_dict(),
                "binaries": {name: code.to_dict() for name, code in self.binaries}}


def wheel_gpu_code(infos: Sequence[ElfInfo]) -> WheelGpuCode:
    return WheelGpuCode(tuple(sorted((i.arcname, i.gpu_code) for i in infos if i.gpu_code is not None)),
                        tuple(sorted((i.arcname, i.kernel_less) for i in infos if i.kernel_less)))


def gpu_backend(facts: WheelContents) -> str | None:
    """``cuda`` or ``rocm`` for a compiled GPU build: the build variant its provenance
    names (or else its local version, ``+torch214cu130cxx11``, ``+torch213rocm71cxx11``)."""
    variant = (facts.provenance or {}).get("variant")
    if isinstance(variant, dict):
        backend = variant.get("backend")
        return backend if backend in ("cuda", "rocm") and variant.get("noarch") is False else None
    version = facts.filename.split("-")[1] if facts.filename.count("-") >= 4 else ""
    match = _GPU_LOCAL.search(version)
    return _BACKENDS[match[1]] if match else None


def is_cuda_wheel(facts: WheelContents) -> bool:
    return gpu_backend(facts) == "cuda"


def check_gpu_code(facts: WheelContents, infos: Sequence[ElfInfo]) -> tuple[list[Finding], WheelGpuCode]:
    code = wheel_gpu_code(infos)
    findings = [Finding("gpu", Status.PASS, f"{name}: {_described(held, code, name)}")
                for name, held in code.binaries]
    findings += _record_findings(facts, code)
    backend = gpu_backend(facts)
    if backend is None:
        return findings, code
    word = _WORDS[backend][0]
    if not infos:
        if facts.binaries:  # Windows and macOS binaries: their device code is not read
            findings.append(Finding("gpu", Status.NOT_VERIFIED, f"the {word} device code of binaries "
                                                                "other than Linux ELF is not read"))
        return findings, code
    total = code.wheel
    if total.empty:
        idle = code.idle
        why = f" ({idle.describe()} compiled from host code only)" if not idle.empty else ""
        findings.append(Finding("gpu", Status.FAIL, f"a {word} build with no kernel in any binary's "
                                                    f"device code{why}: it runs on no GPU"))
        return findings, code
    if backend == "cuda":
        findings += _variant_findings(facts, total)
    findings += _claim_findings(facts, code, backend)
    if not any(f.status is Status.FAIL for f in findings):
        findings.append(Finding("gpu", Status.PASS, f"the wheel runs on GPUs with {total.describe()}"))
    return findings, code


def _described(held: GpuCode, code: WheelGpuCode, name: str) -> str:
    idle = dict(code.kernel_less).get(name)
    if idle is None or idle.empty:
        return held.describe()
    without = f"no kernel in {idle.describe()}"
    return f"{held.describe()}; {without}" if not held.empty else without


def _claim_findings(facts: WheelContents, code: WheelGpuCode, backend: str) -> list[Finding]:
    """metadata.json's ``backend.archs`` against what runs where (the module docstring)."""
    _, thing, example = _WORDS[backend]
    total = code.wheel
    findings: list[Finding] = []
    verdicts: list[ClaimVerdict] = []
    for arch in _claimed_archs(facts):
        found = judge_claim(arch, total) if isinstance(arch, str) else None
        if found is None or (backend == "rocm") != (found.claim[:3] == "gfx"):
            findings.append(Finding("gpu", Status.FAIL, f"metadata.json's backend.archs holds "
                                                        f"{_shown(arch)}, which is not {example}"))
        else:
            verdicts.append(found)
    spelled = [v for v in verdicts if not v.exact and v.covered]
    missing = [v for v in verdicts if not v.covered]
    if spelled:
        findings.append(Finding("gpu", Status.INFO, "metadata.json's backend.archs claims "
                                + ", ".join(f"{v.claim} (held as {v.runs_as}, which runs there)"
                                            for v in spelled)))
    if missing and len(missing) == len(verdicts):
        findings.append(Finding("gpu", Status.FAIL, f"metadata.json's backend.archs claims "
                                                    f"{', '.join(v.claim for v in missing)}, where no "
                                                    f"binary holds code that runs (their kernels are "
                                                    f"for {total.describe()})"))
    elif missing:
        idle = code.idle.describe()
        findings.append(Finding("gpu", Status.NOT_VERIFIED, _unproved(missing, total, idle, thing)))
    return findings


def _unproved(missing: list[ClaimVerdict], total: GpuCode, idle: str, thing: str) -> str:
    why = []
    partly = [v.claim for v in missing if v.runs_as is not None]  # '+PTX' without PTX for later GPUs
    if partly:
        why.append(f"{', '.join(partly)}: no PTX that later GPUs can compile")
    if idle != "no device code":
        why.append(f"{idle} hold no kernel, compiled from host code only")
    why.append("kernel-builder lists every component's capabilities, also those of one that "
               "compiles no kernel for them")
    return (f"metadata.json's backend.archs claims {', '.join(v.claim for v in missing)}, where no "
            f"{thing} with a kernel runs ({'; '.join(why)}): the wheel is recorded and installed "
            f"for what its kernels run on, {total.describe()}")


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
        said = parse_json(text)
    except ValueError:
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


__all__ = ["WheelGpuCode", "check_gpu_code", "gpu_backend", "is_cuda_wheel", "wheel_gpu_code"]
