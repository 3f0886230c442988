"""The core of ``to-wheel``: source -> variants -> wheel -> check -> output folder.

Read top to bottom: resolve the revision, select variants, fetch only those, then
for each variant plan its wheel (the contract), write it to a hidden temp file,
check it, and move it into place atomically.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import __version__
from .checks import CheckReport, check_wheel
from .errors import CheckFailedError, UsageError
from .kernel_metadata import KernelMetadata, python_requirements, read_kernel_metadata
from .layout import VariantLayout, read_layout
from .plan import TagOptions, WheelPlan, plan_wheel
from .revision import Revision
from .selection import VariantFilter, select_variants
from .sources import FetchedVariant, KernelSource
from .variants import Variant
from .versions import RequestKind, VersionRequest, wheel_version
from .wheelmeta import (
    PROVENANCE_FILE,
    DescribedKernel,
    card_body,
    card_license,
    metadata_text,
    normalise_license,
    provenance_text,
    wheel_text,
)
from .wheelwriter import Member, file_sha256, place_wheel, staged_wheel, write_wheel

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ConvertOptions:
    output_dir: Path = Path(".")
    tags: TagOptions = field(default_factory=TagOptions)
    filters: VariantFilter = field(default_factory=VariantFilter)
    dist_name: str | None = None
    #: The wheel version, when the user gives it instead of deriving it from the revision.
    version: str | None = None
    force: bool = False
    check: bool = True
    #: Zip timestamps; default SOURCE_DATE_EPOCH, else the commit time.
    source_date_epoch: int | None = None
    jobs: int = 0  # 0: one per CPU, at most 4
    #: Tag Linux wheels with the lowest manylinux policy their binaries meet.
    manylinux_auto: bool = False

    def __post_init__(self) -> None:
        if self.manylinux_auto and not self.check:
            raise UsageError("--manylinux-version auto needs the checks (drop --no-check)")


@dataclass(frozen=True)
class WheelResult:
    variant: Variant
    path: Path
    sha256: str
    size: int
    status: str  # written, replaced, unchanged
    check: CheckReport | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant.name,
            "wheel": self.path.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "size": self.size,
            "status": self.status,
            "check": self.check.to_dict() if self.check else None,
        }


@dataclass(frozen=True)
class ConversionResult:
    source: str
    revision: Revision
    version: str
    wheels: tuple[WheelResult, ...]
    skipped: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "revision": self.revision.to_dict(),
            "version": self.version,
            "wheels": [w.to_dict() for w in self.wheels],
            "skipped": [{"folder": n, "reason": r} for n, r in self.skipped],
        }


def _epoch(options: ConvertOptions, revision: Revision) -> int:
    if options.source_date_epoch is not None:
        return options.source_date_epoch
    if env := os.environ.get("SOURCE_DATE_EPOCH"):
        try:
            return int(env)
        except ValueError:
            raise UsageError(f"SOURCE_DATE_EPOCH '{env}' is not an integer") from None
    return revision.commit_time or 0


def _summary(name: str, variant: Variant) -> str:
    if variant.noarch:
        return f"{name} kernel (Python, {variant.backend})"
    parts = [f"{variant.framework} {variant.framework_version_str}", variant.backend_tag,
             f"{variant.cpu_arch} {variant.os}"]
    return f"{name} kernel ({', '.join(parts)})"


class _Converter:
    def __init__(self, source: KernelSource, revision: Revision, version: str,
                 options: ConvertOptions, card: str | None, progress: Progress) -> None:
        self.source, self.revision, self.version = source, revision, version
        self.options, self.card, self.progress = options, card, progress
        self.epoch = _epoch(options, revision)

    def members(self, plan: WheelPlan, layout: VariantLayout, meta: KernelMetadata,
                variant: Variant, described: DescribedKernel) -> list[Member]:
        members = [Member(f.arcname, source=f.source, executable=f.source.suffix == ".so")
                   for f in layout.files]
        provenance = {
            "generator": f"kernel-wheels {__version__}",
            "source": self.source.display,
            "requested": self.revision.requested,
            "ref": self.revision.ref,
            "commit": self.revision.commit,
            "commit_time": self.revision.commit_time,
            "variant": variant.to_dict(),
            "layout": layout.kind,
            "module": layout.module,
            "backend": meta.backend or variant.backend,
            "archs": list(meta.archs),
            "metadata_json": meta.raw or None,
        }
        texts = {
            "METADATA": metadata_text(plan, described),
            "WHEEL": wheel_text(plan),
            PROVENANCE_FILE: provenance_text(provenance),
        }
        members += [Member(f"{plan.dist_info}/{name}", content=text.encode())
                    for name, text in texts.items()]
        return members

    def convert_variant(self, variant: Variant, fetched: FetchedVariant) -> WheelResult:
        folder = fetched.path
        meta_path = folder / "metadata.json"
        meta = read_kernel_metadata(meta_path if meta_path.is_file() else None)
        kernel_name = meta.name or self.source.name
        layout = read_layout(folder, kernel_name.replace("-", "_"), fetched.link_root)
        plan = plan_wheel(variant, kernel_name, self.version, self.options.tags,
                          self.options.dist_name)
        warn = lambda message: self.progress(f"warning: {variant.name}: {message}")  # noqa: E731
        described = DescribedKernel(
            summary=_summary(kernel_name, variant),
            description=card_body(self.card),
            license=normalise_license(meta.license or card_license(self.card), warn),
            requirements=tuple(python_requirements(meta.python_depends,
                                                   meta.backend or variant.backend)),
            source_url=self.revision.url,
        )
        if self.options.manylinux_auto and variant.os == "linux":
            plan = self._honest_plan(plan, self.members(plan, layout, meta, variant, described),
                                     variant, kernel_name)
        return self._place(variant, plan, self.members(plan, layout, meta, variant, described))

    def _honest_plan(self, plan: WheelPlan, members: list[Member], variant: Variant,
                     kernel_name: str) -> WheelPlan:
        """--manylinux-version auto: the plan re-tagged with the lowest manylinux policy
        the binaries meet, found by checking a probe wheel."""
        with staged_wheel(self.options.output_dir, plan.filename) as probe:
            write_wheel(probe, members, plan.dist_info, self.epoch)
            honest = check_wheel(probe, filename=plan.filename).honest_manylinux
        if honest is None:
            return plan
        _, major, minor, _arch = honest.split("_", 3)
        tags = replace(self.options.tags, manylinux_version=f"{major}.{minor}")
        return plan_wheel(variant, kernel_name, self.version, tags, self.options.dist_name)

    def _place(self, variant: Variant, plan: WheelPlan, members: list[Member]) -> WheelResult:
        with staged_wheel(self.options.output_dir, plan.filename) as temp:
            write_wheel(temp, members, plan.dist_info, self.epoch)
            report = check_wheel(temp, filename=plan.filename) if self.options.check else None
            return self._finish(variant, plan, temp, report)

    def _finish(self, variant: Variant, plan: WheelPlan, temp: Path,
                report: CheckReport | None) -> WheelResult:
        if report is not None and not report.passed:
            hint = ""
            if report.honest_manylinux and any(f.check == "manylinux" for f in report.failures):
                hint = (f" (the binaries honestly meet {report.honest_manylinux}: use "
                        "--manylinux-version auto)")
            raise CheckFailedError(f"{plan.filename} failed its checks and was not written: "
                                   f"{report.first_failure()}{hint}")
        sha256, size = file_sha256(temp), temp.stat().st_size
        final = self.options.output_dir / plan.filename
        status = place_wheel(temp, final, force=self.options.force)
        self.progress(f"☸ {plan.filename}")
        return WheelResult(variant, final, sha256, size, status, report)


def to_wheels(source: KernelSource, request: VersionRequest,
              options: ConvertOptions | None = None,
              progress: Progress = lambda _: None) -> ConversionResult:
    """Convert the selected variants of ``source`` at ``request`` into wheels."""
    options = options or ConvertOptions()
    # Absolute: the checks run auditwheel, which changes the working directory.
    options = replace(options, output_dir=options.output_dir.resolve())
    revision = source.resolve(request)
    if revision.commit:
        progress(f"{source.display}: {revision.requested} -> "
                 f"{revision.ref or revision.requested} at commit {revision.commit}")
    if revision.commit and revision.commit_time is None and options.source_date_epoch is None \
            and "SOURCE_DATE_EPOCH" not in os.environ:
        progress("warning: the commit's time is unknown (offline and never converted online?): "
                 "zip timestamps are 1980-01-01; set SOURCE_DATE_EPOCH for reproducible bytes")
    names = source.variant_names(revision)
    selection = select_variants(names, options.filters, source.display)
    for name, why in selection.not_variants:
        progress(f"skipping build/{name}: {why}")
    chosen = list(selection.selected)
    progress(f"converting {len(chosen)} of {len(names)} variants")

    with tempfile.TemporaryDirectory(prefix="kernel-wheels-") as work:
        folders = source.fetch(revision, [v.name for v in chosen], Path(work))
        first_meta = folders[chosen[0].name].path / "metadata.json"
        major = read_kernel_metadata(first_meta if first_meta.is_file() else None).version
        given = options.version
        if given is None and revision.commit is None and request.kind is not RequestKind.RANGE:
            given = request.text  # a plain folder: VERSION is taken as given
        version = wheel_version(revision.ref, revision.commit_time, major, given)
        converter = _Converter(source, revision, version, options, source.card(revision),
                               progress)
        jobs = options.jobs or min(4, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(converter.convert_variant, v, folders[v.name]) for v in chosen]
            wheels = tuple(f.result() for f in futures)
    return ConversionResult(source.display, revision, version, wheels, selection.not_variants)
