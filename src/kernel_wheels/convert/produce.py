"""Producing one wheel from a :class:`~kernel_wheels.convert.assemble.WheelJob`: tag it honestly
(``--manylinux-version auto``, ``--macos-version auto``), write it into the staging folder,
check it from what the writer computed, and report. Runs in a worker thread (or inline
for a single variant); everything it needs arrives in the job.
"""

from __future__ import annotations

import base64
import errno
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CheckFailedError, OutputError, ProvenanceError
from ..kernel.arrival import ArrivalCancelled, ArrivalRestarted
from ..kernel.digest import is_digested
from ..kernel.layout import is_binary_name
from ..kernel.variants import Variant
from ..progress import Progress, as_progress
from ..provenance.variant import BUNDLE, SignedDigest, digest_mismatch
from ..wheel.compression import DeflateSlots
from ..wheel.plan import WheelPlan
from ..wheel.writer import WrittenMember, write_wheel
from .assemble import WheelJob, job_members

if TYPE_CHECKING:
    from ..checks import CheckReport

_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


@dataclass(frozen=True)
class ProducedWheel:
    variant: Variant
    filename: str
    temp: Path  # in the staging folder
    size: int
    report: CheckReport | None


def _macos_plan(job: WheelJob) -> WheelPlan:
    """The plan tagged with the macOS version the binaries need (``--macos-version auto``)."""
    from ..checks.foreign import macos_needed
    from ..wheel.plan import macos_version_for

    needed = macos_needed(f.source for f in job.files if is_binary_name(f.arcname))
    return job.plan(replace(job.tags, macos_version=macos_version_for(job.variant, needed)))


def _honest_plan(job: WheelJob) -> WheelPlan:
    """The plan tagged with the lowest manylinux policy the binaries meet."""
    from ..checks.manylinux import honest_policy
    from ..elf.reader import ELF_MAGIC, ElfError, read_elf

    plan = job.plan()
    if job.variant.os != "linux" or job.variant.cpu_arch is None:
        return plan
    infos = []
    for packed in job.files:
        if not is_binary_name(packed.arcname):
            continue
        with packed.source.open("rb") as stream:
            if stream.read(4) != ELF_MAGIC:
                continue
        try:
            infos.append(read_elf(packed.source, packed.arcname))
        except ElfError:
            return plan  # the check that follows names the broken file
    if not infos:
        return plan
    honest, _outside = honest_policy(infos, job.variant.cpu_arch)
    if not honest.name.startswith("manylinux_"):
        return plan
    _, major, minor, _arch = honest.name.split("_", 3)
    return job.plan(replace(job.tags, manylinux_version=f"{major}.{minor}"))


def _gpu_properties(job: WheelJob, cancel: threading.Event | None) -> WheelJob:
    """A CUDA build's variant wheel names the GPUs its binaries hold code for
    (``nvidia :: sm_arch``), read from them once they have arrived, not metadata.json's
    claim (which ``check`` holds them to)."""
    if job.variant_wheel is None or job.variant.backend != "cuda" or job.variant.noarch:
        return job
    from ..kernel.gpu_archs import GpuCode
    from ..wheel.gpu_record import binaries_code
    from ..wheel.variant_label import VariantWheel, sm_arch_of_code, variant_wheel

    job = _settled(job, cancel)
    code = GpuCode()
    for _, held in binaries_code([(f.arcname, f.source) for f in job.files if is_binary_name(f.arcname)]):
        code = code.union(held)
    found = variant_wheel(job.variant, (), sm_arch_of_code(code.cubins, code.ptx))
    return replace(job, variant_wheel=found) if isinstance(found, VariantWheel) else job


def _say_gpu_notes(report: CheckReport, filename: str, say: Progress) -> None:
    """What the GPU check could not prove, or found spelled differently, in a wheel it
    passed (metadata.json's archs against what runs where): said, not kept quiet."""
    from ..checks.report import Status

    for finding in report.findings:
        if finding.check == "gpu" and finding.status in (Status.INFO, Status.NOT_VERIFIED):
            say(f"{filename}: {finding.status.value}: [gpu] {finding.message}")


def _settled(job: WheelJob, cancel: threading.Event | None) -> WheelJob:
    """The job once every file it packs has arrived (verified, in the cache)."""
    for packed in job.files:
        if packed.arriving is not None and not packed.arriving.wait(cancel):
            # The download gave up: the source reports why, and the run stops.
            raise ArrivalCancelled(f"{packed.relpath} did not arrive")
    return replace(job, files=tuple(replace(f, arriving=None) for f in job.files))


def _signed_bytes(job: WheelJob, written: tuple[WrittenMember, ...], temp: Path) -> None:
    """A signed variant's packed bytes against what was verified: metadata.json and its
    bundle as verified, every file as the signed digest says, none it does not cover.
    Always, --no-check or not: a signature proves nothing about files nobody compared."""
    verification = job.verification
    if verification is None or not verification.signed:
        return
    folder = job.provenance["variant_folder"] + "/"
    packed = {m.arcname[len(folder):]: m.sha256 for m in written if m.arcname.startswith(folder)}
    reason = None
    for name, want in (("metadata.json", verification.metadata_sha256),
                       (BUNDLE, verification.bundle_sha256)):
        if name not in packed or packed[name].hex() != want:
            reason = f"{name} changed after it was verified"
    if reason is None:
        # (never None for a signed variant; an empty digest would cover no file)
        signed = job.signed_digest or SignedDigest("sha256", ())
        if signed.algorithm == "sha256":  # the writer hashed every packed byte with it
            actual = {relpath: base64.b64encode(digest).decode("ascii")
                      for relpath, digest in packed.items() if is_digested(relpath)}
        else:  # another of kernels-data's algorithms: the packed members read again
            from ..checks.digests import zip_member_digests

            actual = {relpath: digest for relpath, digest
                      in zip_member_digests(temp, folder, signed.algorithm).items() if is_digested(relpath)}
        reason = digest_mismatch(dict(signed.files), actual)
    if reason is not None:
        temp.unlink(missing_ok=True)
        raise ProvenanceError(f"{verification.kernel} {verification.variant}: {reason}")


def produce_wheel(job: WheelJob, cancel: threading.Event | None = None,
                  slots: DeflateSlots | None = None,
                  progress: Progress | None = None) -> ProducedWheel:
    """``cancel``, once set, stops the writing at the next chunk (Ctrl-C, SIGTERM, an
    error in another wheel of the run). ``slots`` bounds the run's deflate threads.
    Files still arriving are read as they land; if a transfer has to start over, the
    wheel is written again from the finished files."""
    if job.manylinux_auto or job.macos_auto:
        job = _settled(job, cancel)  # the tag is read from the whole binaries first
    job = _gpu_properties(job, cancel)
    plan = _honest_plan(job) if job.manylinux_auto else _macos_plan(job) if job.macos_auto \
        else job.plan()
    say = as_progress(progress)
    try:
        return _produce(job, plan, cancel, slots, say)
    except ArrivalRestarted:
        return _produce(_settled(job, cancel), plan, cancel, slots, say)


def _produce(job: WheelJob, plan: WheelPlan, cancel: threading.Event | None,
             slots: DeflateSlots | None, say: Progress) -> ProducedWheel:
    members = job_members(job, plan)
    temp = job.staging / plan.filename
    task = say.task(f"writing {plan.filename}", sum(m.size for m in members), "B")
    try:
        written = write_wheel(temp, members, plan.dist_info, job.epoch, job.compression, cancel, slots,
                              on_bytes=task.advance)
    except OSError as exc:
        # The output folder's disk is full, or a file-size limit or quota stops the wheel:
        # name the folder, not the staging file (which is removed with its folder).
        if exc.errno in _OUTPUT_ERRNOS or exc.filename == str(temp):
            raise OutputError(f"cannot write {plan.filename} to {job.staging.parent}: "
                              f"{exc.strerror or exc}") from None
        raise
    finally:
        task.finish()
    _signed_bytes(job, written.members, temp)
    report = None
    if job.check:
        # Imported here, not at the top: the checks' imports (the stable-ABI symbol
        # tables, packaging's metadata validation) then load while the first wheel is
        # already being compressed on the other cores, not before it starts.
        from ..checks import judge_written

        report = judge_written(written, members, plan.filename)
    if report is not None and not report.passed:
        temp.unlink(missing_ok=True)
        hint = ""
        if report.honest_manylinux and any(f.check == "manylinux" for f in report.failures):
            hint = (f" (the binaries honestly meet {report.honest_manylinux}: use "
                    "--manylinux-version auto)")
        raise CheckFailedError(f"{plan.filename} failed its checks and was not written: "
                               f"{report.first_failure()}{hint}")
    if report is not None:
        _say_gpu_notes(report, plan.filename, say)
    return ProducedWheel(job.variant, plan.filename, temp, temp.stat().st_size,
                         report)
