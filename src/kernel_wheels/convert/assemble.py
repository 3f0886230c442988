"""What goes into one variant's wheel: a :class:`WheelJob`, planned in the main process
from the fetched variant folder, and the members it stands for.

A job is plain data (it crosses into a worker process): the variant, the kernel's
identity and version, the tag options, what METADATA says, the provenance record and the
files to pack. Only things that are the same for everyone converting the same commit
with the same options go into a job: no local paths, no spelling of the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..checks.facts import is_binary_name
from ..kernel.layout import PackedFile, VariantLayout
from ..kernel.metadata import KernelMetadata, kernel_requirements, python_requirements
from ..kernel.revision import Revision
from ..kernel.variants import Variant
from ..provenance import VERIFIED_FILE, Verification
from ..provenance.verify import SignedDigest
from ..wheel.gpu_record import gpu_record_member
from ..wheel.guard import guard_member
from ..wheel.loader import loader_member
from ..wheel.metadata import (
    PROVENANCE_FILE,
    DescribedKernel,
    card_body,
    card_license,
    license_fields,
    metadata_text,
    provenance_text,
    wheel_text,
)
from ..wheel.plan import TagOptions, WheelPlan, plan_wheel
from ..wheel.sbom import SbomFacts, sbom_member
from ..wheel.variant_label import VARIANT_JSON, VariantWheel, variant_json_text
from ..wheel.writer import Member

#: How a wheel is laid out inside (the provenance record says it; ``check`` reads both):
#: 1, kernel-wheels 0.1: the package moved to ``<module>/``, one guard line in its
#: ``__init__.py``; 2: the variant folder unchanged at ``<module>/<variant>/``, a loader
#: in front of it (wheel/loader.py).
WHEEL_LAYOUT = 2


@dataclass(frozen=True)
class WheelJob:
    variant: Variant
    kernel_name: str
    version: str
    tags: TagOptions
    dist_name: str | None
    described: DescribedKernel
    provenance: dict[str, Any]
    files: tuple[PackedFile, ...]
    module: str
    epoch: int
    compression: int
    check: bool
    manylinux_auto: bool
    #: Where the worker writes the wheel (a staging folder inside the output folder).
    staging: Path
    #: Set for the build's variant wheel (``--variants``): its label and properties.
    variant_wheel: VariantWheel | None = None
    #: What the variant's provenance proved (``<dist-info>/kernel_wheels.verified.json``).
    verification: Verification | None = None
    #: A signed variant's digest: the packed bytes must match it.
    signed_digest: SignedDigest | None = None

    @property
    def macos_auto(self) -> bool:
        """Whether the build's macosx tag is read from its binaries once they have
        arrived (``--macos-version auto``, wheel/plan.py's ``macos_version_for``)."""
        return self.tags.macos_auto and self.variant.os == "darwin" and not self.variant.noarch

    def plan(self, tags: TagOptions | None = None) -> WheelPlan:
        label = self.variant_wheel.label if self.variant_wheel else None
        return plan_wheel(self.variant, self.kernel_name, self.version, tags or self.tags,
                          self.dist_name, label)


def summary(name: str, variant: Variant) -> str:
    if variant.noarch:
        return f"{name} kernel (Python, {variant.backend})"
    parts = [f"{variant.framework} {variant.framework_version_str}", variant.backend_tag,
             f"{variant.cpu_arch} {variant.os}"]
    return f"{name} kernel ({', '.join(parts)})"


def describe(kernel_name: str, variant: Variant, meta: KernelMetadata, card: str | None,
             revision: Revision, warn: Callable[[str], None]) -> DescribedKernel:
    """METADATA's facts from metadata.json (and the card); ``warn`` gets what the wheel
    cannot carry as metadata.json means it: a format ``kernels`` no longer loads, a
    dependency pinned to a revision."""
    for line in (*meta.warnings, *(d.pip_cannot_pin() for d in meta.kernel_depends)):
        if line:
            warn(line)
    expression, text = license_fields(meta.license or card_license(card))
    return DescribedKernel(
        summary=summary(kernel_name, variant),
        description=card_body(card),
        license=expression,
        requirements=tuple(python_requirements(meta.python_depends, meta.backend or variant.backend)
                           + kernel_requirements(meta.kernel_depends)),
        source_url=revision.url,
        license_text=text,
        project_urls=tuple((label, url) for label, url in (("Upstream", meta.upstream),
                                                            ("Kernel source", meta.source)) if url),
    )


def provenance(revision: Revision, variant: Variant, layout: VariantLayout,
               meta: KernelMetadata, repo_id: str | None = None) -> dict[str, Any]:
    """The provenance record (``<dist-info>/kernel_wheels.json``). What the user typed
    (``1.1.2`` or ``>=1.1,<2``) and where their clone lives are deliberately absent.
    ``repo_id`` (a folder or git source's Hub repository) is recorded only when known, so
    that a Hub release's wheels keep their bytes."""
    record: dict[str, Any] = {
        "generator": f"kernel-wheels {__version__}",
        "wheel_layout": WHEEL_LAYOUT,
        "source": revision.source_url,
        "commit": revision.commit,
        "commit_time": revision.commit_time,
        "release": revision.release,
        "variant": variant.to_dict(),
        "layout": layout.kind,
        "module": layout.module,
        "variant_folder": f"{layout.module}/{layout.folder}",
        "backend": meta.backend or variant.backend,
        "archs": list(meta.archs),
        "metadata_json": meta.raw or None,
    }
    if repo_id is not None:
        record["repo_id"] = repo_id
    if meta.kernel_depends:
        # The dependencies as metadata.json pins them, and what each became: a revision
        # pin has no Requires-Dist form (local-kernels holds installed kernels to it).
        record["kernel_depends"] = [{**d.as_json(), "requirement": d.requirement()}
                                    for d in meta.kernel_depends]
    return record


def job_members(job: WheelJob, plan: WheelPlan) -> list[Member]:
    """Every member of the job's wheel under ``plan``, except RECORD: the variant folder
    unchanged, the loader and (binary torch builds) the import guard beside it, the
    dist-info texts, and the SBOM (written last, from the digests of all the others)."""
    members = [Member(f.arcname, source=f.source, executable=f.source.suffix == ".so",
                      arriving=f.arriving) for f in job.files]
    guard = guard_member(job.variant, job.module, plan)
    loader = loader_member(job.module, job.provenance["variant_folder"].split("/", 1)[1],
                           job.provenance["layout"], guarded=guard is not None)
    members.append(loader)
    record = dict(job.provenance)
    record["added_by_kernel_wheels"] = {"loader": loader.arcname}
    if guard is not None:
        members.append(guard)
        record["added_by_kernel_wheels"]["import_guard"] = guard.arcname
    texts = {
        "METADATA": metadata_text(plan, job.described),
        "WHEEL": wheel_text(plan),
    }
    if job.variant_wheel is not None:
        record["variant_label"] = job.variant_wheel.label
        texts[VARIANT_JSON] = variant_json_text({job.variant_wheel.label: job.variant_wheel.properties})
    texts[PROVENANCE_FILE] = provenance_text(record)
    if job.verification is not None:
        texts[VERIFIED_FILE] = job.verification.text()
    members += [Member(f"{plan.dist_info}/{name}", content=text.encode())
                for name, text in texts.items()]
    if job.variant.backend in ("cuda", "rocm") and not job.variant.noarch:
        # which GPUs the binaries run on, read from them once they are all written
        binaries = [(f.arcname, f.source) for f in job.files if is_binary_name(f.arcname)]
        members.append(gpu_record_member(plan.dist_info, binaries))
    members.append(sbom_member(plan.dist_info, sbom_facts(job, plan)))
    return members


def sbom_facts(job: WheelJob, plan: WheelPlan) -> SbomFacts:
    record = job.provenance
    return SbomFacts(
        filename=plan.filename,
        project=plan.project_name,
        version=plan.version,
        kernel_name=job.kernel_name,
        kernel_version=job.version,
        variant=job.variant.name,
        source_url=record.get("source"),
        commit=record.get("commit"),
        release=record.get("release"),
        license=job.described.license,
        requirements=(plan.torch_requirement, *job.described.requirements),
        metadata_json=record.get("metadata_json") or {},
    )
