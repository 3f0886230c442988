"""What kernel-wheels adds to a variant folder to make its wheel, as one function of the
folder's files and the recorded conversion: :func:`derived_members`.

A kernel wheel holds two kinds of members (docs/wheel-contract.md, "A closed contract"):
the variant folder, unchanged, whose files its metadata.json digests (and, for a signed
build, the publisher's signature covers); and the members kernel-wheels writes itself:
the loader, the import guard, METADATA, WHEEL, the provenance record, the verified
record, the GPU record, the variant file, the SBOM and RECORD. Every one of the latter is
made here, from the folder and a :class:`Conversion` (the values a conversion decided,
all of which the wheel records), and from nothing else. ``to-wheel`` writes what this
module derives; ``check`` derives it again from the wheel's own folder and records and
compares bytes (checks/contract.py), so that nothing kernel-wheels writes is trusted
because it is there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..kernel.metadata import KernelMetadata, kernel_requirements, python_requirements
from ..kernel.revision import Revision
from ..kernel.variants import Variant
from ..provenance.record import VERIFIED_FILE, Verification
from .guard import guard_member
from .loader import loader_member
from .members import Member
from .metadata import (
    PROVENANCE_FILE,
    DescribedKernel,
    card_body,
    card_license,
    license_fields,
    metadata_text,
    provenance_text,
    wheel_text,
)
from .plan import WheelPlan
from .sbom import SbomFacts, sbom_member
from .variant_label import VARIANT_JSON, VariantWheel, variant_json_text

#: How a wheel is laid out inside (the provenance record says it; ``check`` reads both):
#: 1, kernel-wheels 0.1: the package moved to ``<module>/``, one guard line in its
#: ``__init__.py``; 2: the variant folder unchanged at ``<module>/<variant>/``, a loader
#: in front of it (wheel/loader.py).
WHEEL_LAYOUT = 2

#: Gives the GPU record's bytes once every binary is written (and so has arrived).
GpuRecordBytes = Callable[[], bytes]


@dataclass(frozen=True)
class Conversion:
    """Everything a kernel wheel's own members derive from, besides the variant folder:
    what the conversion decided (the kernel's name and version, the wheel's module), what
    METADATA says beyond the plan, the provenance record, the variant wheel's label and
    properties, and what its provenance proved. The wheel records each of them."""

    variant: Variant
    kernel_name: str
    version: str
    module: str
    described: DescribedKernel
    #: The provenance record as planned (``kernel_wheels.json`` less what the members add).
    record: dict[str, Any]
    variant_wheel: VariantWheel | None = None
    verification: Verification | None = None


def summary(name: str, variant: Variant) -> str:
    if variant.noarch:
        return f"{name} kernel (Python, {variant.backend})"
    parts = [f"{variant.framework} {variant.framework_version_str}", variant.backend_tag,
             f"{variant.cpu_arch} {variant.os}"]
    return f"{name} kernel ({', '.join(parts)})"


def describe(kernel_name: str, variant: Variant, meta: KernelMetadata, card: str | None,
             source_url: str | None, warn: Callable[[str], None] | None = None,
             card_licence: str | None = None) -> DescribedKernel:
    """METADATA's facts from metadata.json (and the card: its body, and its licence when
    metadata.json names none; ``card_licence`` gives that licence directly, as a wheel
    records it in METADATA); ``warn`` gets what the wheel cannot carry as metadata.json
    means it: a format ``kernels`` no longer loads, a dependency pinned to a revision."""
    for line in (*meta.warnings, *(d.pip_cannot_pin() for d in meta.kernel_depends)):
        if line and warn is not None:
            warn(line)
    expression, text = license_fields(meta.license or card_licence or card_license(card))
    return DescribedKernel(
        summary=summary(kernel_name, variant),
        description=card_body(card),
        license=expression,
        requirements=tuple(python_requirements(meta.python_depends, meta.backend or variant.backend)
                           + kernel_requirements(meta.kernel_depends)),
        source_url=source_url,
        license_text=text,
        project_urls=tuple((label, url) for label, url in (("Upstream", meta.upstream),
                                                            ("Kernel source", meta.source)) if url),
    )


def provenance_record(revision: Revision, variant: Variant, layout: str, module: str, folder: str,
                      meta: KernelMetadata, kernel_name: str, repo_id: str | None = None,
                      repo_id_from: str | None = None) -> dict[str, Any]:
    """The provenance record (``<dist-info>/kernel_wheels.json``). What the user typed
    (``1.1.2`` or ``>=1.1,<2``) and where their clone lives are deliberately absent.
    ``repo_id`` (a folder or git source's Hub repository) is recorded only when known,
    with where it came from (``repo_id_from``: kernel.repo_id's ``REPO_ID_FROM_BUILD`` or
    ``REPO_ID_BY_HAND``)."""
    record: dict[str, Any] = {
        "generator": f"kernel-wheels {__version__}",
        "wheel_layout": WHEEL_LAYOUT,
        "kernel_name": kernel_name,
        "source": revision.source_url,
        "commit": revision.commit,
        "commit_time": revision.commit_time,
        "release": revision.release,
        "variant": variant.to_dict(),
        "layout": layout,
        "module": module,
        "variant_folder": f"{module}/{folder}",
        "backend": meta.backend or variant.backend,
        "archs": list(meta.archs),
        "metadata_json": meta.raw or None,
    }
    if repo_id is not None:
        record["repo_id"] = repo_id
        record["repo_id_from"] = repo_id_from
    if meta.kernel_depends:
        # The dependencies as metadata.json pins them, and what each became: a revision
        # pin has no Requires-Dist form (local-kernels holds installed kernels to it).
        record["kernel_depends"] = [{**d.as_json(), "requirement": d.requirement()}
                                    for d in meta.kernel_depends]
    return record


def derived_members(conversion: Conversion, plan: WheelPlan,
                    gpu_record: GpuRecordBytes | None) -> list[Member]:
    """Every member kernel-wheels writes into the wheel of ``conversion`` under ``plan``,
    RECORD aside (the writer makes it from all the others): the loader and (binary torch
    builds) the import guard beside the variant folder, the dist-info texts, the GPU
    record (CUDA and ROCm builds: ``gpu_record`` gives its bytes) and the SBOM (made last,
    from the digests of all the others)."""
    variant, record = conversion.variant, dict(conversion.record)
    folder, layout = str(record["variant_folder"]).split("/", 1)[1], str(record["layout"])
    guard = guard_member(variant, conversion.module, plan)
    loader = loader_member(conversion.module, folder, layout, guarded=guard is not None)
    members = [loader]
    record["added_by_kernel_wheels"] = {"loader": loader.arcname}
    if guard is not None:
        members.append(guard)
        record["added_by_kernel_wheels"]["import_guard"] = guard.arcname
    texts = {
        "METADATA": metadata_text(plan, conversion.described),
        "WHEEL": wheel_text(plan),
    }
    if conversion.variant_wheel is not None:
        record["variant_label"] = conversion.variant_wheel.label
        texts[VARIANT_JSON] = variant_json_text({conversion.variant_wheel.label:
                                                 conversion.variant_wheel.properties})
    texts[PROVENANCE_FILE] = provenance_text(record)
    if conversion.verification is not None:
        texts[VERIFIED_FILE] = conversion.verification.text()
    members += [Member(f"{plan.dist_info}/{name}", content=text.encode())
                for name, text in texts.items()]
    if gpu_record is not None:
        members.append(gpu_record_member(plan.dist_info, gpu_record))
    members.append(sbom_member(plan.dist_info, sbom_facts(conversion, plan, record)))
    return members


def has_gpu_record(variant: Variant) -> bool:
    """Whether a build's wheel carries ``kernel_wheels_gpu.json`` (binary CUDA and ROCm builds)."""
    return variant.backend in ("cuda", "rocm") and not variant.noarch


def gpu_record_member(dist_info: str, gpu_record: GpuRecordBytes) -> Member:
    from .gpu_record import GPU_RECORD

    return Member(f"{dist_info}/{GPU_RECORD}", derive=lambda _written: gpu_record())


def sbom_facts(conversion: Conversion, plan: WheelPlan, record: dict[str, Any]) -> SbomFacts:
    return SbomFacts(
        filename=plan.filename,
        project=plan.project_name,
        version=plan.version,
        kernel_name=conversion.kernel_name,
        kernel_version=conversion.version,
        variant=conversion.variant.name,
        source_url=record.get("source"),
        commit=record.get("commit"),
        release=record.get("release"),
        license=conversion.described.license,
        requirements=(plan.torch_requirement, *conversion.described.requirements),
        metadata_json=record.get("metadata_json") or {},
    )
