"""The static index site: a folder that any web server or object store serves as is.

Layout (``docs/index-scheme.md``)::

    SITE/index.html                    a landing page naming the indexes
    SITE/files/<wheel>                 every wheel, once
    SITE/files/<wheel>.metadata        its METADATA (PEP 658)
    SITE/simple/                       every wheel: index.html (PEP 503), index.json (PEP 691)
    SITE/simple/<project>/             the project's files, same two forms
    SITE/<target>/simple/...           only what a machine of that target should get
    SITE/.kernel-wheels/               state cache, lock, staging (not needed to serve)

:func:`build_site` reads top to bottom: lock -> what the site holds -> what the inputs
add (a different file under an existing name is refused) -> inspect and check the new
wheels (all refused if one fails: nothing written, and a site folder the run created
is removed again) -> place files and metadata -> render the pages whose files differ
from what the state recorded -> root pages -> remove what is no longer listed ->
state. Files are in place before any page links to them, and every file is replaced
by a rename, so a run killed at any point leaves a valid index; and since the state
records a project's pages and the site's targets only after they were written (a
state written mid-run keeps the projects and targets of the wheels it no longer needs
to inspect as pending), the next run finishes what a killed one left undone: it gives
the same site as a run never interrupted.
Every path written is proven inside the site (:func:`~kernel_wheels.confine.inside`):
a folder of the site replaced by a link that leads out stops the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..confine import file_name, inside
from ..errors import CheckFailedError, IndexConflictError, UsageError
from ..index.targets import parse_kernel_wheel, parse_target_key, targets_of
from ..index.wheelfacts import Inspection, WheelFacts, collect_wheels, inspect_wheel
from ..kernel.digest import file_sha256
from ..processes import die_with_parent
from ..progress import SILENT_TASK, Task, as_progress, counted
from ..provenance import Policy
from ..wheel.variant_label import split_variant_label
from .atomic import SiteLock, Staging
from .pages import (
    FILES,
    RENDERER,
    SIMPLE,
    PageWriter,
    remove_unlisted,
    render_pages,
    write_landing_page,
    write_roots,
)
from .state import SiteState, StatKey, stat_key
from .variants import write_variants_files
from .yanks import YankChange, change_yank, load_yanks, release_of

Progress = Callable[[str], None]

STATE_DIR = ".kernel-wheels"


@dataclass(frozen=True)
class SiteResult:
    site: Path
    added: tuple[str, ...]
    already_present: tuple[str, ...]
    wheels: int
    projects: int
    targets: tuple[str, ...]
    pages_written: int
    pages_unchanged: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": str(self.site),
            "added": list(self.added),
            "already_present": list(self.already_present),
            "wheels": self.wheels,
            "projects": self.projects,
            "indexes": [f"{SIMPLE}/"] + [f"{t}/{SIMPLE}/" for t in self.targets],
            "targets": list(self.targets),
            "pages_written": self.pages_written,
            "pages_unchanged": self.pages_unchanged,
        }


@dataclass(frozen=True)
class _Job:
    """One wheel to inspect; its copy (``copy``) and METADATA go to ``stage``."""

    path: Path
    stage: Path
    copy: bool
    #: The provenance policy the wheel's check re-verifies under (None: kernels').
    policy: Policy | None = None


def _inspect_job(job: _Job) -> Inspection:
    """Runs in a worker: read, check, and stage the wheel's copy and metadata file, so
    that the run's main process only renames files into place."""
    inspection = inspect_wheel(job.path, job.stage / job.path.name if job.copy else None, job.policy)
    if inspection.metadata is not None:
        staged = job.stage / f"{job.path.name}.metadata"
        staged.write_bytes(inspection.metadata)
        staged.chmod(0o644)
    if inspection.copy is not None:
        inspection.copy.chmod(0o644)
    return inspection


def inspect_all(jobs: Sequence[_Job], processes: int, task: Task = SILENT_TASK) -> list[Inspection]:
    """Inspect and check wheels, in worker processes when there are several; ``task``
    advances by one per wheel checked."""
    workers = min(processes or os.cpu_count() or 1, len(jobs))
    found: list[Inspection] = []
    if workers <= 1:
        for job in jobs:
            found.append(_inspect_job(job))
            task.advance()
        return found
    chunk = max(1, min(64, len(jobs) // (workers * 4)))
    with ProcessPoolExecutor(workers, initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        for inspection in pool.map(_inspect_job, jobs, chunksize=chunk):
            found.append(inspection)
            task.advance()
    return found


def _scan_site_files(files_dir: Path, state: SiteState) -> tuple[dict[str, WheelFacts], list[Path]]:
    """Wheels already in the site: cached facts while their stat is unchanged, else
    to be inspected again."""
    known: dict[str, WheelFacts] = {}
    unknown: list[Path] = []
    with os.scandir(files_dir) as entries:
        for entry in entries:
            if not entry.name.endswith(".whl") or not entry.is_file():
                continue
            cached = state.wheels.get(entry.name)
            if cached and cached[0] == stat_key(entry.stat()):
                known[entry.name] = cached[1]
            else:  # not placed by a run (its name was checked then): check it now
                file_name(entry.name, f"{files_dir}: a wheel in the site")
                unknown.append(Path(entry.path))
    return known, unknown


def _input_sha256(path: Path, state: SiteState, seen: dict[str, tuple[StatKey, str]]) -> str:
    key = stat_key(path.stat())
    absolute = str(path.resolve())
    cached = state.inputs.get(absolute)
    sha = cached[1] if cached and cached[0] == key else file_sha256(path)
    seen[absolute] = (key, sha)
    return sha


def _new_inputs(site: Path, wheel_paths: Sequence[Path], facts: dict[str, WheelFacts],
                unknown: Sequence[Path], state: SiteState,
                seen: dict[str, tuple[StatKey, str]]) -> tuple[list[Path], list[str]]:
    """(wheels to add, names already there); a different file under a name the site
    has is refused."""
    unknown_names = {p.name: p for p in unknown}
    new_paths: list[Path] = []
    present: list[str] = []
    for path in wheel_paths:
        name = path.name
        if name not in facts and name not in unknown_names:
            new_paths.append(path)
            continue
        have = facts[name].sha256 if name in facts else file_sha256(unknown_names[name])
        if _input_sha256(path, state, seen) != have:
            raise IndexConflictError(
                f"{name} is already in {site} with different content; a published file never "
                "changes: give the new build another version")
        present.append(name)
    return new_paths, present


def _inspect(jobs: Sequence[_Job], processes: int, state: SiteState,
             say: Progress) -> list[Inspection]:
    """Check every wheel; any refusal stops the run before the site is touched."""
    if jobs:
        say(f"checking {len(jobs)} wheel(s)")
    task = as_progress(say).task("checking", len(jobs)) if jobs else SILENT_TASK
    try:
        inspections = inspect_all(jobs, processes, task)
    finally:
        task.finish()
    for job, inspection in zip(jobs, inspections, strict=True):
        if inspection.refusal is not None:
            refused = sum(i.refusal is not None for i in inspections)
            more = f" (and {refused - 1} more wheels)" if refused > 1 else ""
            if job.copy:
                raise CheckFailedError(f"{job.path.name} refused: {inspection.refusal}{more}; "
                                       "the index was not changed")
            raise CheckFailedError(f"{job.path} fails its checks: {inspection.refusal}{more}; "
                                   "remove it and run again")
        known = state.wheels.get(job.path.name)
        if not job.copy and known and inspection.facts and \
                known[1].sha256 != inspection.facts.sha256:
            raise IndexConflictError(
                f"{job.path} changed since it was indexed; a published file never changes: "
                "restore it, or remove it and run again")
    return inspections


def _place(site: Path, inspections: Sequence[Inspection], incoming: Path,
           facts: dict[str, WheelFacts], state: SiteState) -> set[str]:
    """Move checked wheels and their metadata files into ``files/`` (renames only).
    Returns the projects whose files may have changed."""
    touched = {i.facts.project for i in inspections if i.facts}
    for inspection in inspections:
        assert inspection.facts is not None
        name = inspection.facts.filename
        final = inside(site, f"{FILES}/{name}", "the site's files")
        if inspection.copy is not None:
            os.replace(inspection.copy, final)
        os.replace(incoming / f"{name}.metadata",
                   inside(site, f"{FILES}/{name}.metadata", "the site's files"))
        facts[name] = inspection.facts
        state.wheels[name] = (stat_key(final.stat()), inspection.facts)
    for name in set(state.wheels) - set(facts):  # removed from files/ by hand
        touched.add(state.wheels.pop(name)[1].project)
    return touched


def _remember_inputs(state: SiteState, facts: dict[str, WheelFacts],
                     new_paths: Sequence[Path], seen: dict[str, tuple[StatKey, str]]) -> None:
    """Input files are remembered by stat while the site holds a wheel of their name."""
    remembered = {p: row for p, row in state.inputs.items() if os.path.basename(p) in facts}
    remembered.update(seen)
    for path in new_paths:
        remembered[str(path.resolve())] = (stat_key(path.stat()), facts[path.name].sha256)
    state.inputs = remembered


def _write_state(state: SiteState, site: Path, staging: Staging) -> None:
    text = state.to_json().encode()
    path = inside(site, f"{STATE_DIR}/state.json", "the site's state")
    if not (path.is_file() and path.read_bytes() == text):
        staging.write(path, text)


def _make_folders(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents; those this call created, outermost
    first."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:  # made by another run meanwhile: not ours to remove
            continue
        created.append(folder)
    return created


def _undo_folders(created: Sequence[Path], lock: Path) -> None:
    """After a refused run: remove the folders it created, innermost first, each only
    if empty once the lock is gone."""
    lock.unlink(missing_ok=True)  # a run waiting for it takes a new one (SiteLock)
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:  # not empty: it holds what is not this run's to remove
            continue


def build_site(site: Path, inputs: Sequence[Path], targets: Sequence[str] = (), *,
               jobs: int = 0, progress: Progress | None = None,
               refresh: Iterable[str] = (), policy: Policy | None = None) -> SiteResult:
    """Add ``inputs`` (wheels or folders of wheels) to the static index at ``site`` and
    bring every page up to date. ``targets``: target keys to index beyond those of the
    wheels' own builds; ``refresh``: projects whose pages to render again (a yank). A run
    that is refused (a wheel fails its checks, a conflict) leaves the site as it was, and
    no site folder behind where there was none."""
    wanted_targets = {parse_target_key(t).key for t in targets}
    wheel_paths = collect_wheels(inputs)
    for path in wheel_paths:
        file_name(path.name, "a wheel to index")
    state_dir = site / STATE_DIR
    # Folders this run makes, so that a refusal can take them away again.
    created = _make_folders(state_dir)
    lock_path = inside(site, f"{STATE_DIR}/lock", "the site's lock")
    with SiteLock(lock_path, on_wait=progress):
        try:
            return _build_locked(site, wheel_paths, wanted_targets, jobs, progress, created,
                                 set(refresh), policy)
        except BaseException:
            if not (state_dir / "state.json").exists():  # nothing of this run was kept
                _undo_folders(created, lock_path)
            raise


def _build_locked(site: Path, wheel_paths: Sequence[Path], wanted_targets: set[str], jobs: int,
                  progress: Progress | None, created: list[Path], refresh: set[str],
                  policy: Policy | None = None) -> SiteResult:
    say = progress or (lambda _message: None)
    files_dir, state_dir = site / FILES, site / STATE_DIR
    with Staging(state_dir / "staging") as staging:
        state = SiteState.load(state_dir / "state.json")
        created += _make_folders(files_dir)
        inside(site, f"{FILES}/{FILES}", "the site's files")  # files/ leads nowhere else
        facts, unknown = _scan_site_files(files_dir, state)
        seen: dict[str, tuple[StatKey, str]] = {}
        new_paths, present = _new_inputs(site, wheel_paths, facts, unknown, state, seen)

        incoming = staging.folder / "incoming"
        incoming.mkdir()
        inspections = _inspect([_Job(p, incoming, True, policy) for p in new_paths]
                               + [_Job(p, incoming, False, policy) for p in unknown], jobs, state, say)
        # Files and metadata first: no page may point at a file that is not there.
        # What this run changes, added to what a killed run left pending.
        state.pending_projects |= _place(site, inspections, incoming, facts, state) | set(refresh)
        # Targets never go away, so only the wheels inspected now can add one.
        state.pending_targets |= targets_of(
            w for i in inspections if (w := parse_kernel_wheel(i.path.name)))
        _remember_inputs(state, facts, new_paths, seen)
        if len(inspections) >= 64:
            # A run killed from here on need not check these wheels again. Project
            # records and targets still describe the old pages: the state keeps the
            # projects and targets whose pages are still to be written as pending, for
            # the next run (which will not inspect these wheels) to write them.
            _write_state(state, site, staging)

        writer = PageWriter(staging, site)
        all_targets = state.targets | state.pending_targets | wanted_targets
        # Variants files before the pages that link to them (docs/variants.md).
        variant_entries = write_variants_files(files_dir, facts, staging)
        listed = render_pages(site, facts, all_targets, state, state.pending_projects, writer,
                              variant_entries, load_yanks(state_dir))
        write_roots(site, listed, writer)
        remove_unlisted(site, listed)
        _remove_stale_metadata(files_dir, facts)
        write_landing_page(site, sorted(all_targets), writer)
        state.renderer, state.targets = RENDERER, all_targets
        state.pending_targets, state.pending_projects = set(), set()
        _write_state(state, site, staging)

    added = tuple(sorted(p.name for p in new_paths))
    say(f"{site}: {len(added)} wheel(s) added, {len(present)} already there; "
        f"{counted(len(facts), 'wheel')}, {counted(len(state.projects), 'project')}, "
        f"{counted(len(all_targets), 'target index', 'target indexes')}; "
        f"{counted(writer.written, 'page')} written, {writer.unchanged} unchanged")
    return SiteResult(site, added, tuple(sorted(present)), len(facts), len(state.projects),
                      tuple(sorted(all_targets)), writer.written, writer.unchanged)


def _remove_stale_metadata(files_dir: Path, facts: dict[str, WheelFacts]) -> None:
    with os.scandir(files_dir) as entries:
        stale = [e.path for e in entries
                 if e.name.endswith(".whl.metadata") and e.name[: -len(".metadata")] not in facts]
    for path in stale:
        Path(path).unlink(missing_ok=True)


def yank_release(site: Path, name: str, version: str, *, reason: str = "", undo: bool = False,
                 progress: Progress | None = None) -> tuple[YankChange, SiteResult]:
    """Yank (``undo``: un-yank) a release of a static site and render its pages again."""
    files_dir = site / FILES
    if not files_dir.is_dir():
        raise UsageError(f"{site} is not a kernel-wheels site (no {FILES}/ folder)")

    def releases(project: str) -> set[str]:
        found = set()
        for path in files_dir.glob("*.whl"):
            try:
                wheel_name, wheel_version, _, _ = parse_wheel_filename(split_variant_label(path.name)[0])
            except InvalidWheelFilename:
                continue
            if wheel_name == project and (release := release_of(str(wheel_version))) is not None:
                found.add(release)
        return found

    change = change_yank(site / STATE_DIR, releases, name, version, reason=reason, undo=undo)
    return change, build_site(site, [], progress=progress, refresh=[change.project])
