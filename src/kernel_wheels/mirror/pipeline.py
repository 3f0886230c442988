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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..convert.pipeline import ConvertOptions, to_wheels
from ..distribution.wheelfacts import read_facts
from ..errors import KernelWheelsError
from ..kernel.selection import VariantFilter
from ..kernel.versions import RequestKind, VersionRequest
from .finish import FinishResult, finish, needs_finish, object_keys
from .lease import DEFAULT_TTL, Lease
from .listing import HubLister, RepoListing
from .plan import Action, Item, Shard, VersionSelection, plan_repo
from .progress import ItemDone, Listed, Message, Planned, Progress, silent
from .state import Record, encode, load_pending, load_state, pending_key, pending_keys
from .store import Destination, FolderDestination, KillingDestination


@dataclass(frozen=True)
class MirrorOptions:
    filters: VariantFilter = field(default_factory=VariantFilter)
    versions: VersionSelection = field(default_factory=VersionSelection)
    shard: Shard = field(default_factory=Shard)
    replace_moved: bool = False
    prune: bool = False
    dry_run: bool = False
    #: Wheels produced at once per release (0: one per CPU).
    jobs: int = 0
    lease_ttl: float = DEFAULT_TTL
    lease_wait: float = 600.0


@dataclass(frozen=True)
class Row:
    """One line of the final table."""

    status: str  # added, replaced, skipped, moved, yanked, pruned, refused, planned
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
    rows: tuple[Row, ...]
    pages_written: int

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        statuses = ("planned", "added", "replaced", "skipped", "moved", "yanked", "pruned", "refused")
        return {"destination": self.destination, "shard": self.shard, "dry_run": self.dry_run,
                "counts": {s: self.count(s) for s in statuses},
                "pages_written": self.pages_written,
                "items": [r.to_dict() for r in self.rows]}


def mirror(listings: Sequence[RepoListing], store: Destination, options: MirrorOptions | None = None, *,
           lister: HubLister | None = None, progress: Progress = silent) -> MirrorResult:
    """Bring ``store`` up to date with ``listings``; ``lister`` opens the Hub sources the
    conversions download from."""
    options = options or MirrorOptions()
    actions: list[Action] = []
    for listing in listings:
        progress(Listed(listing.repo, len(listing.releases), listing.variants))
        actions += plan_repo(listing, _known(store, listing.repo), options.versions, options.filters,
                             options.shard, options.replace_moved)
    work = [a for a in actions if a.kind in ("add", "replace")]
    progress(Planned(len(work), sum(a.kind == "skip" for a in actions), str(options.shard)))
    rows = [_row(a) for a in actions if a.kind not in ("add", "replace")]
    if options.dry_run:
        rows += [Row("planned", a.item.repo, a.item.version, a.item.variant,
                     "replace" if a.kind == "replace" else "") for a in work]
        return MirrorResult(store.description, str(options.shard), True, tuple(_sorted(rows)), 0)

    rows += _convert_all(work, listings, store, options, lister or HubLister(), progress)
    listed = {listing.repo: listing.versions for listing in listings}
    done = FinishResult()
    if isinstance(store, (FolderDestination, KillingDestination)):
        store.clean_temp()
    if needs_finish(store, listed, options.prune):
        with Lease(store, ttl=options.lease_ttl, wait=options.lease_wait,
                   on_wait=lambda text: progress(Message(text))):
            done = finish(store, listed, prune=options.prune)
    if isinstance(store, (FolderDestination, KillingDestination)):
        store.clean_temp()
    rows += [Row("yanked", repo, version, detail="deleted on the Hub") for repo, version in done.yanked]
    rows += [Row("pruned", repo, version, detail="deleted on the Hub") for repo, version in done.pruned]
    return MirrorResult(store.description, str(options.shard), False, tuple(_sorted(rows)),
                        done.pages_written)


def _known(store: Destination, repo: str) -> dict[tuple[str, str, str], Record]:
    known = dict(load_state(store, repo).records)
    for record in load_pending(store, pending_keys(store, repo)):
        known[record.key] = record  # converted by a run whose finish has not run yet
    return known


def _row(action: Action) -> Row:
    status = {"skip": "skipped", "moved": "moved", "refused": "refused"}[action.kind]
    return Row(status, action.item.repo, action.item.version, action.item.variant, action.reason)


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.repo, r.version, r.variant, r.status))


def _convert_all(work: list[Action], listings: Sequence[RepoListing], store: Destination,
                 options: MirrorOptions, lister: HubLister, progress: Progress) -> list[Row]:
    by_release: dict[tuple[str, str], list[Action]] = {}
    for action in work:
        by_release.setdefault((action.item.repo, action.item.version), []).append(action)
    locks = {listing.repo: listing.locked for listing in listings}
    rows: list[Row] = []
    done = 0
    for (repo, version), planned in by_release.items():
        try:
            uploaded = _convert_release(planned, store, options, lister, locks.get(repo))
        except KernelWheelsError as exc:
            rows += [Row("refused", repo, version, a.item.variant, exc.message) for a in planned]
            continue
        for action, record in uploaded:
            done += 1
            progress(ItemDone(repo, version, action.item.variant, record.wheel, record.size, done, len(work)))
            status = "replaced" if action.kind == "replace" else "added"
            rows.append(Row(status, repo, version, action.item.variant, record.wheel))
        for action in planned[len(uploaded):]:
            rows.append(Row("refused", repo, version, action.item.variant, "the conversion gave no wheel"))
    return rows


def _convert_release(planned: list[Action], store: Destination, options: MirrorOptions,
                     lister: HubLister, locked: Any) -> list[tuple[Action, Record]]:
    """Convert one release's planned variants; upload each wheel's objects, then its
    record. Returns the (action, record) pairs uploaded, in the planned order."""
    first = planned[0].item
    names = {a.item.variant: a for a in planned}
    filters = replace(VariantFilter(), patterns=tuple(glob.escape(n) for n in names))
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-mirror-") as work:
        convert = ConvertOptions(output_dir=Path(work) / "out", filters=filters, jobs=options.jobs)
        result = to_wheels(lister.source(first.repo, locked),
                           VersionRequest(RequestKind.REVISION, first.commit), convert)
        uploaded = []
        for wheel in result.wheels:
            action = names[wheel.variant.name]
            record = _upload(store, action.item, wheel.path)
            uploaded.append((action, record))
    order = list(names)
    return sorted(uploaded, key=lambda pair: order.index(pair[0].item.variant))


def _upload(store: Destination, item: Item, path: Path) -> Record:
    facts, metadata = read_facts(path)
    wheel_key, metadata_key = object_keys(path.name)
    store.put_file(wheel_key, path)
    store.put(metadata_key, metadata)
    record = Record(item.repo, item.version, item.tag, item.commit, item.variant, path.name,
                    facts.project, facts.sha256, facts.size, facts.requires_python,
                    facts.metadata_sha256)
    store.put(pending_key(record), encode(record.to_dict()))
    return record
