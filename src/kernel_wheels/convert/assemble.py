"""What goes into one variant's wheel: a :class:`WheelJob`, planned in the main process
from the fetched variant folder, and the members it stands for.

A job is plain data: the variant, the kernel's identity and version, the tag options,
what METADATA says, the provenance record and the files to pack; what kernel-wheels
writes beside the files is derived from it by wheel/derive.py (which ``check`` runs
again on the finished wheel). Only things that are the same for everyone converting the same commit
with the same options go into a job: no local paths, no spelling of the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..kernel.layout import PackedFile, is_binary_name
from ..kernel.variants import Variant
from ..provenance import Verification
from ..provenance.variant import SignedDigest
from ..wheel.derive import Conversion, derived_members, has_gpu_record
from ..wheel.gpu_record import record_bytes_of
from ..wheel.metadata import DescribedKernel
from ..wheel.plan import TagOptions, WheelPlan, plan_wheel
from ..wheel.variant_label import VariantWheel
from ..wheel.writer import Member


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

    @property
    def conversion(self) -> Conversion:
        """What the wheel's own members derive from (wheel/derive.py)."""
        return Conversion(self.variant, self.kernel_name, self.version, self.module,
                          self.described, self.provenance, self.variant_wheel, self.verification)

    def plan(self, tags: TagOptions | None = None) -> WheelPlan:
        label = self.variant_wheel.label if self.variant_wheel else None
        return plan_wheel(self.variant, self.kernel_name, self.version, tags or self.tags,
                          self.dist_name, label)


def job_members(job: WheelJob, plan: WheelPlan) -> list[Member]:
    """Every member of the job's wheel under ``plan``, except RECORD: the variant folder
    unchanged, then what kernel-wheels derives from it (wheel/derive.py)."""
    members = [Member(f.arcname, source=f.source, executable=f.source.suffix == ".so",
                      arriving=f.arriving) for f in job.files]
    gpu_record = None
    if has_gpu_record(job.variant):
        # which GPUs the binaries run on, read from them once they are all written
        binaries = [(f.arcname, f.source) for f in job.files if is_binary_name(f.arcname)]
        gpu_record = partial(record_bytes_of, binaries)
    return members + derived_members(job.conversion, plan, gpu_record)
