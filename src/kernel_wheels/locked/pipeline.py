"""Convert exactly what a project locked: every kernel of a ``kernels.lock`` at its locked
commit, in one run that places all wheels or none.

Read top to bottom: open each locked kernel's Hub source with the lock's variant hashes;
check every selected variant's listing against the lock before anything is downloaded
(a variant the lock does not know, or a listing that hashes differently, is refused with
both hashes); convert each kernel at its commit into a private staging folder (the Hub
source checks the listing it downloads from against the lock once more, so a Hub that
answers differently the second time gains nothing); then place every wheel at once.

A commit converts to the same bytes however it is asked for, so a locked conversion gives
the same wheels as ``to-wheel org/name X.Y.Z`` of the release at that commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..convert.output import OutputFolder
from ..convert.pipeline import ConversionResult, ConvertOptions, WheelResult, to_wheels
from ..errors import LockError, OutputExistsError
from ..kernel.selection import select_variants
from ..kernel.versions import RequestKind, VersionRequest
from ..network import NetworkSettings
from ..progress import Task, Unit, as_progress
from ..sources.hub import HubSource
from .lockfile import KernelsLock, LockedKernel

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LockedConversion:
    lock: Path
    results: tuple[ConversionResult, ...]

    @property
    def wheels(self) -> tuple[WheelResult, ...]:
        return tuple(wheel for result in self.results for wheel in result.wheels)

    def to_dict(self) -> dict[str, Any]:
        return {"lock": str(self.lock), "kernels": [result.to_dict() for result in self.results]}


def _source(kernel: LockedKernel, network: NetworkSettings | None, progress: Progress,
            repo_type: str | None) -> HubSource:
    return HubSource(kernel.repo_id, repo_type=repo_type, network=network, progress=progress,
                     locked_variants=kernel.variants)


def _request(kernel: LockedKernel) -> VersionRequest:
    return VersionRequest(RequestKind.REVISION, kernel.commit)


def verify(kernel: LockedKernel, source: HubSource, options: ConvertOptions, progress: Progress) -> int:
    """Check the selected variants' listings at the locked commit against the lock;
    returns how many variants were checked. Nothing is downloaded."""
    revision = source.resolve(_request(kernel))
    selected = select_variants(source.variant_names(revision), options.filters, source.display).selected
    if kernel.variants is None:
        progress(f"{kernel.repo_id}: locked at {kernel.commit[:12]} (this lock has no variant "
                 "hashes: each file is checked against the Hub's listing as it downloads)")
        return 0
    for variant in selected:
        assert revision.commit is not None
        source.check_lock(variant.name, revision.commit, source.variant_files(revision, variant.name))
    progress(f"{kernel.repo_id}: {len(selected)} variant(s) at {kernel.commit[:12]} match kernels.lock")
    return len(selected)


def convert_locked(lock: KernelsLock, options: ConvertOptions | None = None, *,
                   network: NetworkSettings | None = None, repo_type: str | None = None,
                   progress: Progress = lambda _: None) -> LockedConversion:
    """Convert every kernel ``lock`` names at its locked commit (all wheels or none)."""
    options = options or ConvertOptions()
    output = OutputFolder(options.output_dir, force=options.force)
    output.preflight()
    try:
        return _convert(lock, options, output, network, repo_type, progress)
    except BaseException:
        output.discard_if_unused()
        raise


def _convert(lock: KernelsLock, options: ConvertOptions, output: OutputFolder,
             network: NetworkSettings | None, repo_type: str | None,
             progress: Progress) -> LockedConversion:
    sources = [(kernel, _source(kernel, network, progress, repo_type)) for kernel in lock.kernels]
    for kernel, source in sources:  # every kernel verified before any is converted
        verify(kernel, source, options, progress)
    with output.staging() as staging:
        converted = []
        for index, (kernel, source) in enumerate(sources):
            folder = staging / f"{index:03d}"
            converted.append(to_wheels(source, _request(kernel),
                                       replace(options, output_dir=folder, force=False),
                                       _Staging(progress)))
        return LockedConversion(lock.path, tuple(_place(converted, output, progress)))


class _Staging:
    """The progress of one kernel's conversion into the staging folder: a wheel is named
    once, when every locked kernel's wheels are placed (:func:`_place`), not also when it
    reaches the staging folder."""

    def __init__(self, progress: Progress) -> None:
        self.progress = as_progress(progress)

    def __call__(self, message: str) -> None:
        if not message.startswith("☸ "):
            self.progress(message)

    def detail(self, message: str) -> None:
        self.progress.detail(message)

    def task(self, description: str, total: int | None = None, unit: Unit = "it") -> Task:
        return self.progress.task(description, total, unit)


def _place(converted: list[ConversionResult], output: OutputFolder,
           progress: Progress) -> list[ConversionResult]:
    """Every wheel of every kernel into the output folder, after every clash is known."""
    names: dict[str, str] = {}
    for result in converted:
        for wheel in result.wheels:
            if (other := names.setdefault(wheel.path.name, result.source)) != result.source:
                raise LockError(f"{other} and {result.source} both give {wheel.path.name}; convert "
                                "them separately (--dist-name)")
    with output.placing():
        clashes = [found for result in converted for wheel in result.wheels
                   if (found := output.conflict(wheel.path.name, wheel.path)) is not None]
        if clashes:
            more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
            raise OutputExistsError(clashes[0] + more)
        placed = []
        for result in converted:
            wheels = []
            for wheel in result.wheels:
                status = output.place(wheel.path.name, wheel.path)
                progress(f"☸ {wheel.path.name}")
                wheels.append(WheelResult(wheel.variant, output.path / wheel.path.name, wheel.size,
                                          status, wheel.check))
            placed.append(replace(result, wheels=tuple(wheels)))
    return placed
