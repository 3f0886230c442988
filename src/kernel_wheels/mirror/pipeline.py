"""``mirror``, top to bottom: list -> plan (this shard's part) -> convert and upload ->
finish (under the lease).

Each planned release is converted once (``to_wheels`` at the listed commit, its planned
variants only, into a private folder); each wheel then goes up as two objects (the wheel,
its PEP 658 ``.metadata``) and only after them its pending record. A page is written
only from records, so it never lists an object that is not complete. A conversion is a
pure function of (repository, commit, variant): a retried or duplicated worker uploads
the same bytes under the same keys, which changes nothing.
"""

from __future__ import annotations

import glob
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import KernelWheelsError, UsageError
from ..kernel.selection import VariantFilter
from ..kernel.versions import RequestKind, VersionRequest
from ..network import NetworkSettings
from ..provenance import Policy
from .finish import FinishResult, Removal, decided_by_hub, finish, needs_finish
from .lease import DEFAULT_TTL, Lease
from .listing import HubLister, RepoListing
from .owners import Owners
from .plan import Action, Item, Shard, VersionSelection, count_items, plan_repo
from .progress import ItemDone, Listed, Message, Planned, Progress, silent
from .published import Refused, judging, keep_passed, published_refusals
from .state import (
    Known,
    PagesRecord,
    Record,
    encode,
    load_state,
    parse_pending,
    pending_key,
    pending_keys,
    repo_of_pending,
)
from .store import (
    Destination,
    FolderDestination,
    KillingDestination,
    is_index_url,
    open_destination,
    with_faults,
)
from .uploads import ServerUploads, StoreUploads, WheelUploads


@dataclass(frozen=True)
class MirrorOptions:
    filters: VariantFilter = field(default_factory=VariantFilter)
    versions: VersionSelection = field(default_factory=VersionSelection)
    shard: Shard = field(default_factory=Shard)
    replace_moved: bool = False
    prune: bool = False
    dry_run: bool = False
    #: Wheels produced at once per release, and repositories finished at once (0: one
    #: per CPU).
    jobs: int = 0
    lease_ttl: float = DEFAULT_TTL
    lease_wait: float = 600.0
    #: What each variant's provenance must prove (docs/provenance.md); under a stated
    #: policy, what the destination already publishes is judged too (mirror/published.py).
    policy: Policy = field(default_factory=Policy)
    #: Remove the published wheels the policy refuses (with their pages), not only say so.
    remove_refused: bool = False


@dataclass(frozen=True)
class Row:
    """One line of the final table."""

    #: added, replaced, present (an index server had the same file already: not
    #: uploaded), moved, yanked, not-yanked (an index server: it cannot be told),
    #: pruned, refused (a conversion, or a published wheel the policy refuses), removed
    #: (a published wheel the policy refuses, with --remove-refused), planned
    status: str
    repo: str
    version: str
    variant: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "repo": self.repo, "version": self.version,
                "variant": self.variant, "detail": self.detail}


@dataclass(frozen=True)
class MirrorResult:
    destination: str
    shard: str
    dry_run: bool
    #: Every item but the skipped ones (those are only counted).
    rows: tuple[Row, ...]
    pages_written: int
    skipped: int = 0
    #: False for an index server: it lists the wheels itself, the mirror writes no pages.
    writes_pages: bool = True

    def count(self, status: str) -> int:
        return self.skipped if status == "skipped" else sum(r.status == status for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        statuses = ("planned", "added", "replaced", "present", "skipped", "moved", "yanked", "not-yanked",
                    "pruned", "refused", "removed")
        return {"destination": self.destination, "shard": self.shard, "dry_run": self.dry_run,
                "counts": {s: self.count(s) for s in statuses},
                "pages_written": self.pages_written if self.writes_pages else None,
                "items": [r.to_dict() for r in self.rows]}


def refuse_removals(options: MirrorOptions) -> None:
    """An index server's upload API can add files only: what would remove or replace one
    is refused (the CLI asks before listing anything)."""
    if options.prune or options.replace_moved or options.remove_refused:
        option = "--prune" if options.prune else "--replace-moved" if options.replace_moved \
            else "--remove-refused"
        raise UsageError(f"{option}: an index server's upload API cannot remove or replace a file; "
                         "mirror into a folder or bucket for that")


def check_target(to: str, state: str | None, options: MirrorOptions) -> None:
    """The usage errors of a mirror's target, found before anything is opened or listed:
    an index server ``to`` needs a ``state`` store and cannot remove or replace files; a
    folder or bucket keeps its own state."""
    if is_index_url(to):
        if not state:
            raise UsageError(f"--to {to}: an index server has no place for the mirror's state; "
                             "give --state DEST (a folder or s3://BUCKET/PREFIX)")
        refuse_removals(options)
    elif state:
        raise UsageError("--state is for an index server --to: a folder or bucket keeps its own state")


def open_target(to: str, state: str | None, options: MirrorOptions, network: NetworkSettings, *,
                prompt: bool = True) -> tuple[Destination, WheelUploads | None]:
    """Where a mirror writes (:func:`check_target` first): ``to``, a folder or
    ``s3://BUCKET/PREFIX``, holds the wheels, pages and state (no uploads: the store's
    own); or ``to`` is an index server's upload URL, which gets the wheels (its
    credentials as ``publish`` reads them; ``prompt``: a missing password may be asked
    for on a terminal) while ``state`` keeps the state and lease. ``network``: the
    timeout and retries of every S3 request."""
    check_target(to, state, options)
    if not is_index_url(to):
        return with_faults(open_destination(to, network=network)), None
    assert state is not None
    store = with_faults(open_destination(state, "--state", network))
    from ..remote.credentials import resolve_repository  # only a run that uploads loads them

    repository = resolve_repository(repository_url=to, interactive=None if prompt else False)
    # The run's own --timeout (issue #39: the uploads took the index default, 60 s, and
    # a stalled server's message named it under --timeout 10).
    return store, ServerUploads(repository, timeout=network.timeout)


def mirror(listings: Sequence[RepoListing], store: Destination, options: MirrorOptions | None = None, *,
           lister: HubLister | None = None, progress: Progress = silent,
           uploads: WheelUploads | None = None) -> MirrorResult:
    """Bring ``store`` up to date with ``listings``; ``lister`` opens the Hub sources the
    conversions download from. ``uploads``: where the wheels go (default: ``store``'s
    ``files/``, with the pages; an index server keeps only the state in ``store``)."""
    options = options or MirrorOptions()
    uploads = uploads or StoreUploads(store)
    if not uploads.writes_pages:
        refuse_removals(options)
    where = store.description if uploads.writes_pages else \
        f"{uploads.description} (state in {store.description})"
    pages = PagesRecord.load(store)
    plan = _plan(listings, store, pages, options, progress)
    _refuse_rivals(plan, listings, store, pages, options)
    progress(Planned(len(plan.work), plan.skipped, str(options.shard)))
    if options.dry_run:
        rows = plan.rows + [Row("planned", a.item.repo, a.item.version, a.item.variant,
                                "replace" if a.kind == "replace" else "") for a in plan.work]
        return MirrorResult(where, str(options.shard), True, tuple(_sorted(rows)), 0, plan.skipped,
                            uploads.writes_pages)
    rows = plan.rows + _convert_all(plan.work, listings, store, uploads, options, lister or HubLister(),
                                    progress)
    refused = _published_refusals(listings, store, options, uploads, progress)
    remove: dict[str, list[Removal]] = {}
    if options.remove_refused:
        for found in refused:
            remove.setdefault(found.record.repo, []).append((found.record.key, found.record.sha256))
    done = _finish_under_lease(store, listings, plan.touched, options, uploads, progress, remove)
    rows += _hub_deletions(done, uploads) + _refusal_rows(refused, done)
    return MirrorResult(where, str(options.shard), False, tuple(_sorted(rows)), done.pages_written,
                        plan.skipped, uploads.writes_pages)


def _published_refusals(listings: Sequence[RepoListing], store: Destination, options: MirrorOptions,
                        uploads: WheelUploads, progress: Progress) -> list[Refused]:
    """The wheels the destination publishes that the run's policy refuses (judged only
    under a stated policy, and only where the mirror writes the pages: an index server's
    files are its own)."""
    if not uploads.writes_pages or not judging(options.policy, options.remove_refused):
        return []
    return published_refusals(store, listings, options.policy, options.versions, options.filters,
                              options.shard, progress)


def _refusal_rows(refused: list[Refused], done: FinishResult) -> list[Row]:
    removed = set(done.removed)
    rows = []
    for found in refused:
        record = found.record
        if record.key in removed:
            rows.append(Row("removed", record.repo, record.version, record.variant,
                            f"{record.wheel}: {found.reason}"))
        else:
            rows.append(Row("refused", record.repo, record.version, record.variant,
                            f"{record.wheel} is published, but the policy refuses it: {found.reason} "
                            "(--remove-refused removes it)"))
    return rows


@dataclass
class _Plan:
    """This shard's part of a run: the items to convert; the rows already decided
    (moved, refused); how many items are there already (counted, not listed: a large
    mirror skips almost everything); the repositories the finish must visit although
    nothing of theirs is converted (records the Hub's releases change, objects to delete)."""

    work: list[Action] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    skipped: int = 0
    touched: list[str] = field(default_factory=list)


def _plan(listings: Sequence[RepoListing], store: Destination, pages: PagesRecord,
          options: MirrorOptions, progress: Progress) -> _Plan:
    """Each listed repository against its records in ``store``, one repository's
    records in memory at a time."""
    plan = _Plan()
    with_pending = {repo_of_pending(key) for key in pending_keys(store)}
    for listing in listings:
        progress(Listed(listing.repo, len(listing.releases), listing.variants))
        if pages.covered.get(listing.repo) == listing.digest and listing.repo not in with_pending:
            # The last finish found this very listing wholly in the state (and nothing
            # is pending): every item is there, and nothing needs the state read.
            plan.skipped += count_items(listing, options.versions, options.filters, options.shard)
            continue
        known, garbage = _known(store, listing.repo)
        if garbage or decided_by_hub(known.values(), listing.versions, options.prune):
            plan.touched.append(listing.repo)
        for action in plan_repo(listing, known, options.versions, options.filters,
                                options.shard, options.replace_moved):
            if action.kind in ("add", "replace"):
                plan.work.append(action)
            elif action.kind == "skip":
                plan.skipped += 1
            else:
                plan.rows.append(_row(action))
    return plan


def _refuse_rivals(plan: _Plan, listings: Sequence[RepoListing], store: Destination,
                   pages: PagesRecord, options: MirrorOptions) -> None:
    """Before anything is written: which repository gives each project (a second one's
    wheels would overwrite the first one's objects under the pages' old sha256); the
    others' items are refused. Rivals are the listed repositories with items, whatever
    the shard (every shard agrees)."""
    rivals = [listing.repo for listing in listings
              if count_items(listing, options.versions, options.filters, Shard())]
    refused = {r.repo: r.reason for r in Owners(store, pages).decide(
        {a.item.repo for a in plan.work}, rivals, write=not options.dry_run)}
    plan.rows += [Row("refused", a.item.repo, a.item.version, a.item.variant, refused[a.item.repo])
                  for a in plan.work if a.item.repo in refused]
    plan.work = [a for a in plan.work if a.item.repo not in refused]


def _finish_under_lease(store: Destination, listings: Sequence[RepoListing], touched: list[str],
                        options: MirrorOptions, uploads: WheelUploads, progress: Progress,
                        remove: Mapping[str, list[Removal]] | None = None) -> FinishResult:
    """Fold the records, yank or prune, remove what the policy refuses (``remove``),
    write the pages: under the lease, and only when that would change anything; a
    folder's temporary files cleaned before and after."""
    done = FinishResult()
    if isinstance(store, (FolderDestination, KillingDestination)):
        store.clean_temp()
    if needs_finish(store, bool(touched or remove)):
        with Lease(store, ttl=options.lease_ttl, wait=options.lease_wait,
                   on_wait=lambda text: progress(Message(text))):
            done = finish(store, {listing.repo: listing for listing in listings}, touched,
                          prune=options.prune, workers=options.jobs, write_pages=uploads.writes_pages,
                          remove=remove)
        for text in done.dropped:
            progress(Message(f"warning: {text}"))
    if isinstance(store, (FolderDestination, KillingDestination)):
        store.clean_temp()
    return done


def _hub_deletions(done: FinishResult, uploads: WheelUploads) -> list[Row]:
    """The releases deleted on the Hub: yanked or pruned. The state records the yank
    either way (a release that comes back is un-yanked); a server's upload API has no
    yank: say so rather than pretend."""
    yanked, how = ("yanked", "") if uploads.writes_pages else ("not-yanked", "; not yanked (index server)")
    rows = [Row(yanked, repo, version, detail=f"deleted on the Hub{how}") for repo, version in done.yanked]
    return rows + [Row("pruned", repo, version, detail="deleted on the Hub") for repo, version in done.pruned]


def _known(store: Destination, repo: str) -> tuple[dict[tuple[str, str, str], Known], bool]:
    """The repository's records (pending ones included: converted by a run whose finish
    has not run yet), and whether its state has objects to delete."""
    state = load_state(store, repo)
    known = {key: (r.commit, r.version, r.yanked) for key, r in state.records.items()}
    for key in pending_keys(store, repo):  # the key names all the plan needs
        version, variant, commit = parse_pending(key)
        known[(repo, version, variant)] = (commit, version, None)
    return known, bool(state.garbage)


def _row(action: Action) -> Row:
    status = {"moved": "moved", "refused": "refused"}[action.kind]
    return Row(status, action.item.repo, action.item.version, action.item.variant, action.reason)


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.repo, r.version, r.variant, r.status))


def _convert_all(work: list[Action], listings: Sequence[RepoListing], store: Destination,
                 uploads: WheelUploads, options: MirrorOptions, lister: HubLister,
                 progress: Progress) -> list[Row]:
    by_release: dict[tuple[str, str], list[Action]] = {}
    for action in work:
        by_release.setdefault((action.item.repo, action.item.version), []).append(action)
    locks = {listing.repo: listing.locked for listing in listings}
    rows: list[Row] = []
    done = 0
    for (repo, version), planned in by_release.items():
        try:
            uploaded = _convert_release(planned, store, uploads, options, lister, locks.get(repo))
        except KernelWheelsError as exc:
            rows += [Row("refused", repo, version, a.item.variant, exc.message) for a in planned]
            continue
        for action, record, sent in uploaded:
            done += 1
            progress(ItemDone(repo, version, action.item.variant, record.wheel, record.size, done, len(work)))
            if not sent:
                rows.append(Row("present", repo, version, action.item.variant,
                                f"{record.wheel} (already on the index server, same sha256; "
                                "not uploaded)"))
                continue
            status = "replaced" if action.kind == "replace" else "added"
            rows.append(Row(status, repo, version, action.item.variant, record.wheel))
        for action in planned[len(uploaded):]:
            rows.append(Row("refused", repo, version, action.item.variant, "the conversion gave no wheel"))
    return rows


def _convert_release(planned: list[Action], store: Destination, uploads: WheelUploads,
                     options: MirrorOptions, lister: HubLister,
                     locked: Any) -> list[tuple[Action, Record, bool]]:
    """Convert one release's planned variants; upload each wheel's objects, then its
    record. Returns (action, record, whether it was sent: False when the index server
    had the file already) for each wheel, in the planned order."""
    from ..convert.pipeline import ConvertOptions, to_wheels  # only a run that converts loads them

    first = planned[0].item
    names = {a.item.variant: a for a in planned}
    filters = replace(VariantFilter(), patterns=tuple(glob.escape(n) for n in names))
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-mirror-") as work:
        convert = ConvertOptions(output_dir=Path(work) / "out", filters=filters, jobs=options.jobs,
                                 policy=options.policy)
        result = to_wheels(lister.source(first.repo, locked),
                           VersionRequest(RequestKind.REVISION, first.commit), convert)
        uploaded = []
        for wheel in result.wheels:
            action = names[wheel.variant.name]
            record, sent = _upload(store, uploads, action.item, wheel.path)
            if uploads.writes_pages and judging(options.policy, options.remove_refused):
                keep_passed(store, options.policy, record.sha256)  # converted under the policy
            uploaded.append((action, record, sent))
    order = list(names)
    return sorted(uploaded, key=lambda pair: order.index(pair[0].item.variant))


def _upload(store: Destination, uploads: WheelUploads, item: Item, path: Path) -> tuple[Record, bool]:
    """The wheel to ``uploads``, then its record; and whether the wheel was sent (False:
    the index server had the same file)."""
    from ..index.wheelfacts import read_facts

    facts, metadata = read_facts(path)
    sent = uploads.upload(path, metadata) is not False  # None (an uploader of before): sent
    record = Record(item.repo, item.version, item.tag, item.commit, item.variant, path.name,
                    facts.project, facts.sha256, facts.size, facts.requires_python,
                    facts.metadata_sha256)
    store.put(pending_key(record), encode(record.to_dict()))
    return record, sent
