"""After the objects: fold pending records into the state, yank or prune what the Hub
no longer has, and write the pages, under the lease.

Order, for crash safety on a store without rename (each step idempotent, so a run killed
anywhere is finished by the next one, with the same bytes):

0. ``pages.json`` names the targets the pending records bring and the repositories
   about to be written (a run that finds them there redoes them whole);
1. per repository whose records change: its project pages (the wheels they list were
   uploaded before their records were), then its state, then its pending records go;
2. the root page of every index, then the landing page;
3. pages of projects an index no longer lists, then the objects of pruned wheels (no
   page lists them any more), then ``pages.json``.

Pages are a pure function of the state: the same records give the same bytes. Each
process holds one repository's records at a time (the run's own process, the names of
projects and targets): peak memory does not grow with the mirror. Repositories are
written by worker processes (``-j``), the root pages by the run's own, after them all.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from ..errors import VariantError
from ..index import simple
from ..index.targets import parse_kernel_wheel, parse_target_key, select_for_target
from ..kernel.variants import parse_variant
from ..processes import die_with_parent
from ..site.pages import FILES, ROOT_INDEX, SIMPLE, landing_page_html
from .listing import RepoListing
from .owners import Owners
from .plan import covered_items
from .state import (
    PAGES,
    PENDING,
    Known,
    PagesRecord,
    Record,
    RepoState,
    load_pending,
    load_state,
    pending_keys,
    project_of,
    repo_of_pending,
    state_key,
    state_repos,
    variant_of_pending,
)
from .store import Destination

#: The reason a release deleted on the Hub is yanked with.
DELETED = "deleted on the Hub"
#: Fewer repositories than this are finished in the run's own process.
PARALLEL_FROM = 2


@dataclass
class FinishResult:
    yanked: list[tuple[str, str]] = field(default_factory=list)  # (repo, version)
    pruned: list[tuple[str, str]] = field(default_factory=list)
    pages_written: int = 0
    repos_rendered: int = 0
    #: Warnings: pending records dropped (their repository does not own its project).
    dropped: list[str] = field(default_factory=list)
    #: Published wheels removed because the policy refuses them: (repo, version, variant).
    removed: list[tuple[str, str, str]] = field(default_factory=list)


def object_keys(wheel: str) -> tuple[str, str]:
    return f"{FILES}/{wheel}", f"{FILES}/{wheel}.metadata"


def _target_of(variant: str) -> str | None:
    from ..index.targets import target_key_of

    try:
        return target_key_of(parse_variant(variant))
    except VariantError:
        return None


class _Writer:
    def __init__(self, store: Destination) -> None:
        self.store, self.written = store, 0

    def put(self, key: str, text: str) -> None:
        data = text.encode()
        if self.store.get(key) != data:
            self.store.put(key, data)
            self.written += 1


def _index_folder(index: str) -> str:
    return f"{index}/{SIMPLE}" if index else SIMPLE


def render_repo(state: RepoState, targets: Iterable[str], writer: _Writer) -> dict[str, set[str]]:
    """Every page of the repository's projects; returns index -> projects listed."""
    listed: dict[str, set[str]] = {}
    by_project: dict[str, list[Record]] = {}
    for record in state.records.values():
        by_project.setdefault(record.project, []).append(record)
    indexes = [ROOT_INDEX, *sorted(targets)]
    parsed = {index: parse_target_key(index) for index in indexes if index}
    for project, records in sorted(by_project.items()):
        # Each wheel's entry once per depth; an index takes the entries of its wheels.
        wheels = [w for r in records if (w := parse_kernel_wheel(r.wheel))]
        entries = {depth: {r.wheel: _entry(r, depth) for r in records} for depth in (2, 3)}
        for index in indexes:
            chosen = wheels if index == ROOT_INDEX else select_for_target(parsed[index], wheels)
            if not chosen:
                continue
            at_depth = entries[2 if index == ROOT_INDEX else 3]
            page = [at_depth[w.filename] for w in chosen]
            folder = f"{_index_folder(index)}/{project}"
            writer.put(f"{folder}/index.json", simple.render_project_json(project, page))
            writer.put(f"{folder}/index.html", simple.render_project_html(project, page))
            listed.setdefault(index, set()).add(project)
    # Their memos (65,536 entries each, a KernelWheel is about 1.5 KB) would otherwise
    # grow with the mirror: one repository's names are all that is ever asked again.
    simple.version_of.cache_clear()
    parse_kernel_wheel.cache_clear()
    return listed


def _entry(record: Record, depth: int) -> simple.WheelEntry:
    return simple.WheelEntry(project=record.project, filename=record.wheel,
                             url="../" * depth + FILES + "/" + quote(record.wheel, safe=""),
                             sha256=record.sha256, requires_python=record.requires_python,
                             core_metadata_sha256=record.metadata_sha256, yanked=record.yanked,
                             size=record.size)


def _merge(state: RepoState, pending: list[Record], present: frozenset[str] | None,
           prune: bool, result: FinishResult) -> None:
    for record in pending:
        old = state.records.get(record.key)
        if old is not None and old.wheel != record.wheel:  # a replaced build of another name
            state.garbage.extend(object_keys(old.wheel))
        state.records[record.key] = record
    if present is None:  # not listed in this run: yanks are not decided
        return
    gone = sorted({r.version for r in state.records.values() if r.version not in present})
    for version in gone:
        if prune:
            for key, record in list(state.records.items()):
                if record.version == version:
                    state.garbage.extend(object_keys(record.wheel))
                    del state.records[key]
            result.pruned.append((state.repo, version))
        elif state.yank(version, DELETED):
            result.yanked.append((state.repo, version))
    for key, record in list(state.records.items()):  # a release that came back
        if record.version in present and record.yanked == DELETED:
            state.records[key] = replace(record, yanked=None)
    keep = {k for r in state.records.values() for k in object_keys(r.wheel)}
    state.garbage = [g for g in state.garbage if g not in keep]


def _merged(store: Destination, repo: str, present: frozenset[str] | None, prune: bool,
            result: FinishResult) -> tuple[RepoState, list[str]]:
    """The repository's state with its pending records folded in and the Hub's deletions
    applied; and the pending records folded (only those may go)."""
    state = load_state(store, repo)
    keys = pending_keys(store, repo)
    _merge(state, load_pending(store, keys), present, prune, result)
    return state, keys


def decided_by_hub(records: Iterable[Known], present: frozenset[str], prune: bool) -> bool:
    """Whether the Hub's releases change these records ((commit, version, yank reason)):
    a release gone (a yank, or with ``prune`` a removal) or a yanked one back."""
    for _commit, version, yanked in records:
        gone = version not in present
        if (gone and (prune or yanked != DELETED)) or (not gone and yanked == DELETED):
            return True
    return False


def needs_finish(store: Destination, hub_changes: bool) -> bool:
    """Whether a finish would change anything (checked without the lease: a run with
    nothing of its own to fold writes nothing, not even the lease). ``hub_changes``:
    the plan found records that the Hub's releases change (:func:`decided_by_hub`)."""
    if hub_changes or next(iter(store.keys(f"{PENDING}/")), None) is not None:
        return True
    return store.get(PAGES) is None or bool(PagesRecord.load(store).dirty)


def finish(store: Destination, listed: Mapping[str, RepoListing], touched: Iterable[str] = (), *,
           prune: bool = False, workers: int = 1, write_pages: bool = True,
           remove: Mapping[str, Iterable[Removal]] | None = None) -> FinishResult:
    """Fold, yank or prune, write pages. ``listed``: repository -> what the Hub has now,
    for the repositories this run listed; ``touched``: those whose records the
    Hub's releases change, or with objects to delete (the plan knows); ``workers``:
    processes writing repositories' pages at once (0: one per CPU); ``write_pages``: False when
    an index server lists the wheels (only the state is kept); ``remove``: repository ->
    the published wheels to remove (the policy refuses them), each removed as a pruned
    one is (record, pages, then objects) if its record still names that wheel. Call it
    holding the lease."""
    result = FinishResult()
    remove = remove or {}
    pages = PagesRecord.load(store)
    changed, targets, repos = _what_changes(store, pages, [*touched, *remove])
    repos = _drop_foreign_pending(store, pages, repos, result)
    _mark_unfinished(store, pages, changed, targets, repos)
    jobs = [_RepoJob(store, repo, listed.get(repo), tuple(sorted(targets)), prune, write_pages,
                     tuple(remove.get(repo, ())))
            for repo in repos]
    folded = _finish_repos(jobs, workers, pages, result)
    writer = _Writer(store)
    if write_pages:
        _write_root_pages(writer, folded.indexes, targets)
    _remove_unlisted(store, pages, folded)
    new_pages = PagesRecord(targets, {i: p for i, p in folded.indexes.items() if p}, folded.owned,
                            folded.covered).to_bytes()
    if store.get(PAGES) != new_pages:
        store.put(PAGES, new_pages)
    result.pages_written += writer.written
    return result


def _what_changes(store: Destination, pages: PagesRecord,
                  touched: Iterable[str]) -> tuple[set[str], set[str], list[str]]:
    """The repositories whose records change, every target (those the pending records
    add: targets never go), and the repositories to render (all of them when a target
    is new). Names only, from the pending records' keys: memory holds one repository's
    records at a time, however large the mirror."""
    changed = set(touched) | pages.dirty  # and what a killed finish left half-written
    targets = set(pages.targets)
    for key in pending_keys(store):
        changed.add(repo_of_pending(key))
        if (target := _target_of(variant_of_pending(key))) is not None:
            targets.add(target)
    if targets != pages.targets or store.get(PAGES) is None:
        return changed, targets, sorted(set(state_repos(store)) | changed)  # every page, for the new targets
    return changed, targets, sorted(changed)


def _drop_foreign_pending(store: Destination, pages: PagesRecord, repos: list[str],
                          result: FinishResult) -> list[str]:
    """``repos`` without those that do not own their project. Only a project's owner
    writes its pages and state (the plan refused the others before they wrote anything).
    What another repository left pending (a run of an older version, a record put there
    by hand) is dropped, never folded: its wheel names are the owner's, and its objects
    are not its own to delete."""
    owners = Owners(store, pages)
    first: dict[str, str] = {}  # a project nobody owns (no claim, no state): the first
    foreign = [r for r in repos if (owners.owner(project_of(r)) or first.setdefault(project_of(r), r)) != r]
    for repo in foreign:
        if keys := pending_keys(store, repo):
            store.delete_many(keys)
            result.dropped.append(f"{repo}: {len(keys)} pending record(s) dropped: "
                                  f"{owners.owner(project_of(repo)) or first[project_of(repo)]} gives the "
                                  f"project {project_of(repo)}")
    return [r for r in repos if r not in foreign]


def _mark_unfinished(store: Destination, pages: PagesRecord, changed: set[str], targets: set[str],
                     repos: list[str]) -> None:
    """Before any pending record is folded (and deleted): the targets they bring and the
    repositories whose pages are about to change, for a run that finishes this one."""
    store.put(PAGES, PagesRecord(targets, pages.indexes, pages.owners,
                                 {r: d for r, d in pages.covered.items() if r not in changed},
                                 set(repos)).to_bytes())


@dataclass
class _Folded:
    """What the repositories' finishes make of the pages record, and which of them
    still have objects to delete."""

    indexes: dict[str, set[str]]  # index -> projects listed
    owned: dict[str, str]  # project -> repository
    covered: dict[str, str]  # repository -> the listing digest its state holds wholly
    with_garbage: list[str] = field(default_factory=list)


def _finish_repos(jobs: list[_RepoJob], workers: int, pages: PagesRecord, result: FinishResult) -> _Folded:
    """Each repository's finish (:func:`_finish_repo`), folded into the pages record's
    indexes, owners and covered listings, and into ``result``."""
    folded = _Folded({i: set(p) for i, p in pages.indexes.items()}, dict(pages.owners), dict(pages.covered))
    for done in _run_jobs(jobs, workers):
        repo = done.repo
        for project in [p for p, owner in folded.owned.items() if owner == repo]:
            for members in folded.indexes.values():
                members.discard(project)
            if project not in done.projects:
                del folded.owned[project]
        for project in done.projects:
            folded.owned[project] = repo
        for index, members in done.listed.items():
            folded.indexes.setdefault(index, set()).update(members)
        folded.covered.pop(repo, None)
        if done.covered is not None:
            folded.covered[repo] = done.covered
        if done.garbage:
            folded.with_garbage.append(repo)
        result.yanked += done.yanked
        result.pruned += done.pruned
        result.removed += done.removed
        result.pages_written += done.written
        result.repos_rendered += 1
    return folded


def _write_root_pages(writer: _Writer, indexes: Mapping[str, set[str]], targets: set[str]) -> None:
    """The root page of every index, then the landing page."""
    for index in [ROOT_INDEX, *sorted(targets)]:
        projects = indexes.get(index, set())
        writer.put(f"{_index_folder(index)}/index.json", simple.render_root_json(projects))
        writer.put(f"{_index_folder(index)}/index.html", simple.render_root_html(projects))
    writer.put("index.html", landing_page_html(sorted(targets)))


def _remove_unlisted(store: Destination, pages: PagesRecord, folded: _Folded) -> None:
    """Pages of projects an index no longer lists, then the objects of pruned or
    replaced wheels (no page lists them any more)."""
    for index, had in pages.indexes.items():
        store.delete_many([f"{_index_folder(index)}/{project}/{name}"
                           for project in sorted(had - folded.indexes.get(index, set()))
                           for name in ("index.json", "index.html")])
    for repo in folded.with_garbage:
        _collect_garbage(store, repo)


#: A published wheel to remove: (its record's key, the sha256 the policy refused).
Removal = tuple[tuple[str, str, str], str]


@dataclass(frozen=True)
class _RepoJob:
    store: Destination
    repo: str
    listing: RepoListing | None
    targets: tuple[str, ...]
    prune: bool
    pages: bool = True
    remove: tuple[Removal, ...] = ()


@dataclass(frozen=True)
class _RepoDone:
    repo: str
    projects: frozenset[str]
    listed: dict[str, set[str]]  # index -> projects listed there
    covered: str | None  # the listing's digest when the state holds all of it
    garbage: bool
    yanked: list[tuple[str, str]]
    pruned: list[tuple[str, str]]
    written: int
    removed: list[tuple[str, str, str]] = field(default_factory=list)


def _finish_repo(job: _RepoJob) -> _RepoDone:
    """One repository (the owner of its project): fold, yank or prune, its pages, its
    state, then its pending records go. Every record was checked to be of this
    repository's project (:meth:`Record.from_dict`)."""
    store, repo, listing = job.store, job.repo, job.listing
    result = FinishResult()
    state, pending = _merged(store, repo, listing.versions if listing else None, job.prune, result)
    removed = _remove_refused(state, job.remove)
    projects = frozenset(r.project for r in state.records.values())
    writer = _Writer(store)
    listed_now = render_repo(state, job.targets, writer) if job.pages else {}
    if store.get(state_key(repo)) != state.to_bytes():
        store.put(state_key(repo), state.to_bytes())
    store.delete_many(pending)
    records = state.records.values()
    whole = listing is not None and not state.garbage and all(r.yanked is None for r in records) \
        and covered_items(listing) == {(r.version, r.variant, r.commit) for r in records}
    return _RepoDone(repo, projects, listed_now, listing.digest if whole and listing else None,
                     bool(state.garbage), result.yanked, result.pruned, writer.written, removed)


def _remove_refused(state: RepoState, remove: Iterable[Removal]) -> list[tuple[str, str, str]]:
    """The published wheels the policy refused, out of the state (their objects become
    garbage: deleted once no page lists them), where the record still names the wheel
    that was judged (a record replaced meanwhile is another wheel)."""
    removed = []
    for key, sha256 in remove:
        record = state.records.get(key)
        if record is None or record.sha256 != sha256:
            continue
        del state.records[key]
        state.garbage.extend(object_keys(record.wheel))
        removed.append(key)
    keep = {k for r in state.records.values() for k in object_keys(r.wheel)}
    state.garbage = [g for g in state.garbage if g not in keep]
    return removed


def _run_jobs(jobs: list[_RepoJob], workers: int) -> Iterator[_RepoDone]:
    """Each repository's finish, in order; in worker processes when there are several
    repositories and workers (rendering pages is CPU work: threads would share one core).
    Each job is an owner's: no two give one project."""
    count = min(workers or os.cpu_count() or 1, len(jobs))
    if count <= 1 or len(jobs) < PARALLEL_FROM:
        for job in jobs:
            yield _finish_repo(job)
        return
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(count, mp_context=context, initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        yield from pool.map(_finish_repo, jobs, chunksize=1)


def _collect_garbage(store: Destination, repo: str) -> None:
    state = load_state(store, repo)
    if not state.garbage:
        return
    store.delete_many(sorted(set(state.garbage)))
    state.garbage = []
    store.put(state_key(repo), state.to_bytes())
