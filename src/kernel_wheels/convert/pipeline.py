"""The core of ``to-wheel``: source -> variants -> wheel -> check -> output folder.

Read top to bottom: check the output folder, resolve the revision, select variants,
fetch them (in parallel; each is planned as soon as it arrives), produce each wheel in
a worker thread (write, check), then place every wheel at once. A run places all its
wheels or none: a failure anywhere leaves the output folder as it was.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..cache import read_publisher_trust, write_publisher_trust
from ..confine import shown
from ..errors import MetadataError, OutputExistsError, UsageError, VariantError
from ..kernel.arrival import Arrival, ArrivalCancelled
from ..kernel.digest import file_sha256
from ..kernel.layout import read_layout
from ..kernel.metadata import KernelMetadata, module_name, read_kernel_metadata
from ..kernel.repo_id import (
    REPO_ID_BY_HAND,
    REPO_ID_FROM_BUILD,
    is_repo_id,
    kernel_named_by,
    names_kernel,
    repo_id_of_hub_url,
)
from ..kernel.revision import Revision
from ..kernel.selection import VariantFilter, select_variants
from ..kernel.variants import Variant
from ..kernel.versions import RequestKind, VersionRequest, wheel_version
from ..progress import as_progress
from ..provenance import Policy, Verification, verify_files
from ..provenance.variant import BUNDLE, MAX_BUNDLE, SignedDigest, signed_digest
from ..reading import open_regular, read_regular
from ..sources import FetchedVariant, KernelSource
from ..wheel import compression
from ..wheel.derive import describe, provenance_record
from ..wheel.plan import TagOptions, check_distribution_name, names_package
from ..wheel.variant_label import NoVariantWheel, variant_wheel
from .assemble import WheelJob
from .output import OutputFolder
from .produce import ProducedWheel, produce_wheel

if TYPE_CHECKING:
    from ..checks import CheckReport

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
    #: Wheels produced at once (worker threads); 0: one per CPU.
    jobs: int = 0
    #: Tag Linux wheels with the lowest manylinux policy their binaries meet.
    manylinux_auto: bool = False
    #: Deflate level, 0 (store) to 9 (compression.py says why 6 is the default).
    compression: int = compression.DEFAULT_LEVEL
    #: Also write each build's variant wheel (PEP 825 draft; docs/variants.md).
    variants: bool = False
    #: What each variant's provenance must prove (docs/provenance.md); by default the
    #: kernels library's: a bundle, when there is one, must verify.
    policy: Policy = field(default_factory=Policy)
    #: The Hub repository a folder or git source is published as (``--repo-id``; else
    #: metadata.json's ``repo-id``): recorded so that local-kernels can map the wheel.
    repo_id: str | None = None

    def __post_init__(self) -> None:
        if self.manylinux_auto and not self.check:
            raise UsageError("--manylinux-version auto needs the checks (drop --no-check)")
        if self.jobs < 0:
            raise UsageError(f"--jobs {self.jobs}: give a positive number of jobs (or 0 for one "
                             "per CPU)")
        compression.check_level(self.compression)
        if self.dist_name is not None:
            check_distribution_name(self.dist_name)
        if self.repo_id is not None and not is_repo_id(self.repo_id):
            raise UsageError(f"--repo-id {shown(repr(self.repo_id))}: give a Hub repository id "
                             "(org/name)")
        if self.version is not None:
            try:
                Version(self.version)
            except InvalidVersion:
                raise UsageError(f"'{self.version}' is not a valid version (PEP 440)") from None


@dataclass(frozen=True)
class WheelResult:
    variant: Variant
    path: Path
    size: int
    status: str  # written, replaced, unchanged
    check: CheckReport | None

    @cached_property
    def sha256(self) -> str:
        """Read from the placed wheel when first asked (the conversion itself never needs
        it: reading the wheel again cost 1.4% of a 4-variant run)."""
        return file_sha256(self.path)

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


def given_epoch(options: ConvertOptions) -> int | None:
    """The zip timestamp the user gave (the option, else SOURCE_DATE_EPOCH), if any."""
    if options.source_date_epoch is not None:
        return options.source_date_epoch
    if env := os.environ.get("SOURCE_DATE_EPOCH"):
        try:
            return int(env)
        except ValueError:
            raise UsageError(f"SOURCE_DATE_EPOCH '{env}' is not an integer") from None
    return None


def zip_epoch(options: ConvertOptions, revision: Revision) -> int:
    given = given_epoch(options)
    return given if given is not None else revision.commit_time or 0


@dataclass
class _Identity:
    """The kernel's name and major version, as the variants' metadata.json files tell
    them. Variants may arrive in any order; all must agree."""

    fallback_name: str
    names: dict[str, str] = field(default_factory=dict)  # name -> first variant saying so
    majors: dict[int, str] = field(default_factory=dict)

    def learn(self, variant: str, meta: KernelMetadata) -> None:
        if meta.name is not None:
            self.names.setdefault(meta.name, variant)
        if meta.version is not None:
            self.majors.setdefault(meta.version, variant)
        if len(self.names) > 1:
            said = ", ".join(f"'{n}' (build/{v})" for n, v in sorted(self.names.items()))
            raise MetadataError(f"the variants disagree on the kernel's name: {said}; convert "
                                "them separately (--variant)")
        if len(self.majors) > 1:
            said = ", ".join(f"{m} (build/{v})" for m, v in sorted(self.majors.items()))
            raise MetadataError(f"the variants disagree on the kernel's major version: {said}")

    @property
    def name(self) -> str:
        return next(iter(self.names), self.fallback_name)

    @property
    def major(self) -> int | None:
        return next(iter(self.majors), None)


class _Conversion:
    """One run: plans each variant as it arrives and hands it to the workers."""

    def __init__(self, source: KernelSource, request: VersionRequest, revision: Revision,
                 options: ConvertOptions, staging: Path, pool: Executor | None,
                 progress: Progress, cancel: threading.Event,
                 slots: compression.DeflateSlots | None = None) -> None:
        self.source, self.request, self.revision = source, request, revision
        self.options, self.staging, self.pool = options, staging, pool
        self.progress = as_progress(progress)
        self.cancel, self.slots = cancel, slots
        self.epoch = zip_epoch(options, revision)
        self.identity = _Identity(source.name)
        self.arrived: dict[str, tuple[Variant, FetchedVariant, KernelMetadata]] = {}
        self.planned: dict[str, tuple[tuple[str, str], list[Future[ProducedWheel]]]] = {}
        self.reported: set[str] = set()
        self.filenames: dict[str, str] = {}  # wheel file name -> the variant planned as it
        self.verified: dict[str, tuple[Verification, SignedDigest | None]] = {}

    @cached_property
    def publisher(self) -> tuple[str | None, bool | None, bool | None]:
        """The kernel's publisher, the Hub's trusted-publisher flag as recorded in the
        wheels, and as the Hub says it now (asked once, the way the kernels library
        asks; sources without publishers: unknown). The recorded flag is the first
        answer for this commit (kept in the tool's cache), so that the same commit gives
        the same bytes online and offline; a policy is held to the answer of now when
        there is one."""
        ask = getattr(self.source, "publisher_trust", None)
        if ask is None:
            return None, None, None
        publisher, now = ask()
        commit = self.revision.commit
        recorded = read_publisher_trust(commit) if commit else None
        if recorded is None and now is not None and commit:
            write_publisher_trust(commit, now)
            recorded = now
        return publisher, recorded, now

    def verify(self, variant: Variant, fetched: FetchedVariant) -> None:
        """The variant's bundle over its metadata.json, before anything is planned; the
        signed digests are compared with the bytes packed (produce.py), so every file is
        read once."""
        bundle_path = fetched.path / BUNDLE
        if (arriving := fetched.arriving.get(BUNDLE)) is not None:
            if not arriving.wait(self.cancel):
                raise ArrivalCancelled(f"build/{variant.name}/{BUNDLE} did not arrive")
            bundle_path = arriving.final
        meta_path = fetched.path / "metadata.json"
        metadata = read_regular(meta_path, "metadata.json", MetadataError) \
            if meta_path.is_file() else None
        bundle = None
        if bundle_path.is_file():
            # Never more than a bundle's size read (a hostile source's huge file is refused).
            with open_regular(bundle_path, BUNDLE, MetadataError, None) as stream:
                bundle = stream.read(MAX_BUNDLE + 1)
        publisher, recorded, now = self.publisher
        # Named by what is the same for everyone converting it (the Hub repository its
        # canonical URL names, through the Hub or a clone; else the kernel's folder
        # name), never by how the request spelled a path: the record is in the bytes.
        kernel = repo_id_of_hub_url(self.revision.source_url or "") \
            or getattr(self.source, "repo_id", None) or self.source.name
        found = verify_files(kernel, f"build/{variant.name}", metadata, bundle,
                             self.options.policy, None, publisher, now if now is not None else recorded)
        found = replace(found, trusted_publisher=recorded)
        signed = signed_digest(found.kernel, found.variant, metadata) \
            if found.signed and metadata is not None else None
        self.verified[variant.name] = (found, signed)

    @cached_property
    def card(self) -> str | None:
        """Fetched when the first variant is planned, not before: by then the other
        variants are downloading, and the card's request overlaps them."""
        return self.source.card(self.revision)

    def version(self) -> str:
        given = self.options.version
        if given is None and self.revision.commit is None \
                and self.request.kind is not RequestKind.RANGE:
            given = self.request.text  # a plain folder: VERSION is taken as given
        return wheel_version(self.revision, self.identity.major, given)

    def arrive(self, variant: Variant, fetched: FetchedVariant) -> None:
        self.verify(variant, fetched)
        meta_path = fetched.path / "metadata.json"
        meta = read_kernel_metadata(meta_path if meta_path.is_file() else None)
        self.identity.learn(variant.name, meta)
        self.arrived[variant.name] = (variant, fetched, meta)
        if not self.identity.names:
            return  # no metadata.json seen yet: the kernel's name may still change
        try:
            self.version()
        except UsageError:
            return  # the major version may come with a later variant's metadata.json
        self._submit(variant.name)

    def finish(self) -> list[ProducedWheel]:
        """Plan what waited for the kernel's identity, re-plan what was planned on a
        guess that a later variant's metadata.json corrected, and collect."""
        final = (self.identity.name, self.version())
        for name in self.arrived:
            if name not in self.planned or self.planned[name][0] != final:
                self._submit(name)
        return [future.result() for name in sorted(self.planned)
                for future in self.planned[name][1]]

    def _submit(self, name: str) -> None:
        variant, fetched, meta = self.arrived[name]
        identity = (self.identity.name, self.version())
        job = self._job(variant, fetched, meta, *identity)
        jobs = [job]
        if self.options.variants:
            # CUDA capabilities are metadata.json's only where the build is a CUDA one.
            archs = meta.archs if (meta.backend or variant.backend) == "cuda" else ()
            found = variant_wheel(variant, archs)
            if isinstance(found, NoVariantWheel):
                if name_not_reported(self, name + "\0variant"):
                    self.progress(f"build/{name}: no variant wheel: {found.reason}")
            else:
                jobs.append(replace(job, variant_wheel=found))
        self.planned[name] = (identity, [self._start(name, each) for each in jobs])

    def _start(self, name: str, job: WheelJob) -> Future[ProducedWheel]:
        # Two variants must never write one file (in the staging folder, then the output).
        filename = job.plan().filename
        if (first := self.filenames.setdefault(filename, name)) != name:
            raise VariantError(f"build/{first} and build/{name} would both be {filename}; "
                               "convert them separately (--variant)")
        if self.pool is None:
            future: Future[ProducedWheel] = Future()
            try:
                future.set_result(produce_wheel(job, self.cancel, self.slots, self.progress))
            except Exception as exc:  # surfaced by finish(), like a worker's error
                future.set_exception(exc)
            # Ctrl-C or SIGTERM (BaseException) goes up at once: the downloads a single
            # variant is read from are then stopped, not waited for.
        else:
            future = self.pool.submit(produce_wheel, job, self.cancel, self.slots, self.progress)
        return future

    def repo_id(self, meta: KernelMetadata, kernel_name: str,
                variant: str) -> tuple[str | None, str | None]:
        """The Hub repository to record for a folder or git source, and where it came
        from (typed by hand, or the build's metadata.json); a Hub source is its own (its
        URL is recorded), whatever a metadata.json says. An id whose name is not the
        kernel's is refused: local-kernels would map it, and ``get_kernel`` of that
        repository would load this kernel (issue #37)."""
        if getattr(self.source, "repo_id", None) is not None:
            return None, None
        repo_id = self.options.repo_id
        if repo_id is not None:
            if not names_kernel(repo_id, kernel_name):
                org = repo_id.split("/", 1)[0]
                raise UsageError(f"--repo-id {repo_id} names the kernel {kernel_named_by(repo_id)}, but "
                                 f"{self.source.display} is the kernel {shown(kernel_name, 80)}: a "
                                 f"repository id must name its kernel (--repo-id "
                                 f"{org}/{shown(kernel_name, 80)})")
            return repo_id, REPO_ID_BY_HAND
        if meta.repo_id is not None and not names_kernel(meta.repo_id, kernel_name):
            name = shown(kernel_name, 80)
            raise MetadataError(f"build/{variant}/metadata.json: 'repo-id' {meta.repo_id} names the "
                                f"kernel {kernel_named_by(meta.repo_id)}, but the kernel is {name}: "
                                "a repository id must name its kernel (fix build.toml's "
                                f"[general.hub] repo-id, or give --repo-id ORG/{name})")
        return meta.repo_id, REPO_ID_FROM_BUILD if meta.repo_id is not None else None

    def dist_name(self, module: str, warn: Callable[[str], None]) -> str | None:
        """The project name: a Hub repository's wheels carry its name (serve lists them
        so: the same file names and bytes from to-wheel and serve), ``--dist-name``
        overrides both; either must name the package (or be a prefixed form of it), as
        ``check`` holds every kernel wheel to (checks/names.py)."""
        given = self.options.dist_name
        if given is not None:
            if not names_package(given, module):
                raise UsageError(f"--dist-name {given}: a kernel wheel's project is named after "
                                 f"the package it installs, {module} ({canonicalize_name(module)}, "
                                 f"or a prefixed form such as acme-{canonicalize_name(module)})")
            return given
        repository = getattr(self.source, "distribution", None)
        if repository is not None and not names_package(repository, module):
            warn(f"the repository's name {repository} does not name the kernel's package "
                 f"{module}: its wheels are named {canonicalize_name(module)} instead")
            return None
        return repository

    def _job(self, variant: Variant, fetched: FetchedVariant, meta: KernelMetadata,
             kernel_name: str, version: str) -> WheelJob:
        module = module_name(kernel_name, f"{self.source.display} (build/{variant.name})")
        layout = read_layout(fetched.path, module, fetched.link_root, fetched.arriving, variant.name)
        if layout.left_out and name_not_reported(self, variant.name):
            # By design and harmless: a detail (-v), naming exactly the files left out.
            self.progress.detail(f"build/{variant.name}: {len(layout.left_out)} byte-code cache "
                                 f"file(s) left out by design: {', '.join(layout.left_out)}")
        def warn(message: str) -> None:
            # Each said once a run (a re-plan says nothing twice); every message names
            # what it is about (a variant's metadata.json, a dependency of all of them).
            if name_not_reported(self, "\0warning\0" + message):
                self.progress(f"warning: {message}")

        return WheelJob(
            variant=variant,
            kernel_name=kernel_name,
            version=version,
            tags=self.options.tags,
            dist_name=self.dist_name(module, warn),
            described=describe(kernel_name, variant, meta, self.card, self.revision.url, warn),
            provenance=provenance_record(self.revision, variant, layout.kind, layout.module,
                                         layout.folder, meta, kernel_name,
                                         *self.repo_id(meta, kernel_name, variant.name)),
            files=layout.files,
            module=layout.module,
            epoch=self.epoch,
            compression=self.options.compression,
            check=self.options.check,
            manylinux_auto=self.options.manylinux_auto,
            staging=self.staging,
            verification=self.verified[variant.name][0],
            signed_digest=self.verified[variant.name][1],
        )

    def provenance_note(self) -> None:
        """One line on what the run's variants proved, when something is unproved
        (unsigned variants, a publisher the Hub does not mark as trusted); the facts are
        in each wheel (docs/provenance.md)."""
        found = [verification for verification, _ in self.verified.values()]
        unsigned = sum(1 for v in found if not v.signed)
        publisher, _recorded, now = self.publisher
        trusted = now if now is not None else _recorded
        parts = []
        if unsigned:
            parts.append(f"{unsigned} of {len(found)} variant(s) unsigned (no metadata.json.sigstore)")
        if publisher is not None and trusted is not True:
            parts.append(f"publisher '{publisher}' is " + ("not a trusted publisher on the Hub"
                                                            if trusted is False else
                                                            "of unknown trust (the Hub did not say)"))
        if parts:
            self.progress(f"note: {self.source.display}: {'; '.join(parts)}; recorded in each "
                          "wheel (--require-signature, --require-trusted-publisher refuse them)")


def name_not_reported(run: _Conversion, name: str) -> bool:
    """True the first time a variant is planned (a re-plan says nothing twice)."""
    if name in run.reported:
        return False
    run.reported.add(name)
    return True


def _pool(jobs: int, variants: int) -> ThreadPoolExecutor | None:
    """Worker threads for more than one variant. Threads, not processes: the work of a
    wheel (reading, sha256, deflate) runs in C with the GIL released (hashlib, zlib-ng,
    file I/O), and the checks no longer need a process of their own (nothing changes the
    working directory), so threads use every core without a process's start-up cost,
    pickling, or a second copy of the tool in memory."""
    workers = min(jobs or os.cpu_count() or 1, variants)
    if workers <= 1:
        return None
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernel-wheels-wheel")


def _lift_when_arrived(slots: compression.DeflateSlots, arrivals: list[Arrival],
                       cancel: threading.Event) -> None:
    """Give the downloads' core back to deflate once the files still arriving are here:
    at once if none is (a single variant is then written on every core), else from a
    thread that waits for them while the last variants are written."""
    pending = [arrival for arrival in arrivals if not arrival.over]
    if not pending:
        slots.lift()
        return

    def lift_after_downloads() -> None:
        try:
            for arrival in pending:
                arrival.wait(cancel)
        except ArrivalCancelled:
            return
        slots.lift()

    threading.Thread(target=lift_after_downloads, name="kernel-wheels-downloads", daemon=True).start()


def to_wheels(source: KernelSource, request: VersionRequest,
              options: ConvertOptions | None = None,
              progress: Progress = lambda _: None) -> ConversionResult:
    """Convert the selected variants of ``source`` at ``request`` into wheels."""
    options = options or ConvertOptions()
    if options.repo_id is not None and getattr(source, "repo_id", None) is not None:
        raise UsageError(f"--repo-id is for a folder or git source; {source.display} is a Hub "
                         "repository, recorded as itself")
    output = OutputFolder(options.output_dir, force=options.force)
    output.preflight()
    try:
        return _convert(source, request, replace(options, output_dir=output.path), output, progress)
    except BaseException:
        output.discard_if_unused()  # a failed run leaves no new, empty output folder
        raise


def _convert(source: KernelSource, request: VersionRequest, options: ConvertOptions,
             output: OutputFolder, progress: Progress) -> ConversionResult:
    given_epoch(options)  # a bad SOURCE_DATE_EPOCH is found before any network work
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
    chosen = {v.name: v for v in selection.selected}
    progress(f"converting {len(chosen)} of {len(names)} variants")

    with tempfile.TemporaryDirectory(prefix="kernel-wheels-") as work, \
            output.staging() as staging:
        pool = _pool(options.jobs, len(chosen))
        cancel = threading.Event()
        # One core for the downloads while they last.
        slots = compression.DeflateSlots((os.cpu_count() or 1) - 1) if source.fetch_downloads else None
        try:
            run = _Conversion(source, request, revision, options, staging, pool, progress, cancel,
                              slots)
            arrivals: list[Arrival] = []
            for handed, (name, fetched) in enumerate(source.fetch(revision, list(chosen), Path(work)), 1):
                arrivals += fetched.arriving.values()
                if handed == len(chosen) and slots is not None:  # no new download starts
                    _lift_when_arrived(slots, arrivals, cancel)
                run.arrive(chosen[name], fetched)
            produced = run.finish()
            version = run.version()
            run.provenance_note()
        except BaseException:
            cancel.set()  # wheels being written stop at their next chunk
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        # All or nothing: every clash is found before the first wheel is placed (and no
        # other run places wheels here in between).
        with output.placing():
            clashes = [found for wheel in produced
                       if (found := output.conflict(wheel.filename, wheel.temp)) is not None]
            if clashes:
                more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
                raise OutputExistsError(clashes[0] + more)
            results = []
            for wheel in produced:
                status = output.place(wheel.filename, wheel.temp)
                progress(f"☸ {wheel.filename}")
                results.append(WheelResult(wheel.variant, output.path / wheel.filename,
                                           wheel.size, status, wheel.report))
    return ConversionResult(source.display, revision, version, tuple(results),
                            selection.not_variants)
