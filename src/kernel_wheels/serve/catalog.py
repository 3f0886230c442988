"""What the server offers: every release tag of every kernel, the variants each has,
and the wheel file name each variant gives, from the Hub's listing alone.

A release is a ``vX.Y.Z`` tag. Its variants are the folders under ``build/`` at the
tag's commit (``list_repo_tree``), and each one's wheel file name is
:func:`kernel_wheels.wheel.plan.plan_wheel` with the default tag options: index pages need no
download and no conversion.

Hub answers are kept for ``ttl`` seconds. A commit's variants never change, so they
are asked for once; a refresh of a known repository is one call (its refs). Every
listing is also written to the cache folder, so that a server restarted while the Hub
is down still knows what it served. When a refresh fails, the last listing is served
("stale") and the Hub is not asked again for a while, so that an outage does not make
every request wait for its timeouts.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from packaging.utils import canonicalize_name

from ..errors import (
    AuthenticationError,
    ListingUnavailableError,
    NetworkError,
    RepoNotFoundError,
    SourceError,
    VariantError,
)
from ..kernel.revision import Revision
from ..kernel.variants import parse_variant
from ..kernel.versions import tag_version
from ..wheel.plan import TagOptions, plan_wheel
from .logs import EventLog
from .settings import Kernel

if TYPE_CHECKING:
    from ..sources.hub import HubSource

#: After a failed refresh, the Hub is asked again after this many seconds at most.
RETRY_AFTER_FAILURE = 30.0
_LISTING_FORMAT = 1


class Hub(Protocol):
    """The two questions the catalog asks the Hub."""

    def release_tags(self, repo_id: str) -> dict[str, str]:
        """{``vX.Y.Z``: commit}."""
        ...

    def variant_names(self, repo_id: str, tag: str, commit: str) -> list[str]:
        """The folders under ``build/`` at ``commit``."""
        ...


class HubListing:
    """:class:`Hub` through :class:`~kernel_wheels.sources.hub.HubSource` objects, one per
    kernel (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, retries and one-line errors
    included). Give them few retries: a stale page beats a page that waits."""

    def __init__(self, sources: Mapping[str, HubSource]) -> None:
        self.sources = sources

    def release_tags(self, repo_id: str) -> dict[str, str]:
        return self.sources[repo_id].release_tags()

    def variant_names(self, repo_id: str, tag: str, commit: str) -> list[str]:
        return self.sources[repo_id].variant_names(Revision(tag, tag, commit, None))


@dataclass(frozen=True)
class ServedWheel:
    """A wheel the server lists, and where it comes from."""

    filename: str
    kernel: Kernel
    tag: str
    version: str
    commit: str
    variant: str
    requires_python: str


@dataclass(frozen=True)
class Release:
    tag: str
    commit: str
    variants: tuple[str, ...]


@dataclass(frozen=True)
class KernelListing:
    """The releases of one kernel as the Hub last told them."""

    kernel: Kernel
    releases: tuple[Release, ...]
    #: Wall-clock seconds when the Hub said so.
    listed_at: float
    #: Why the last refresh failed, while this listing is served stale.
    stale_reason: str | None = None

    @cached_property
    def wheels(self) -> tuple[ServedWheel, ...]:
        wheels = []
        for release in self.releases:
            version = str(tag_version(release.tag))
            for name in release.variants:
                try:
                    variant = parse_variant(name)
                except VariantError:
                    continue  # not a build variant (the conversion would skip it too)
                plan = plan_wheel(variant, self.kernel.project, version, TagOptions(),
                                  self.kernel.project)
                wheels.append(ServedWheel(plan.filename, self.kernel, release.tag, version,
                                          release.commit, name, plan.requires_python))
        return tuple(wheels)

    @cached_property
    def by_filename(self) -> dict[str, ServedWheel]:
        return {wheel.filename: wheel for wheel in self.wheels}

    def to_json(self) -> str:
        return json.dumps({"format": _LISTING_FORMAT, "repo": self.kernel.repo_id,
                           "listed_at": self.listed_at,
                           "releases": [[r.tag, r.commit, list(r.variants)] for r in self.releases]})

    @classmethod
    def from_json(cls, kernel: Kernel, text: str) -> KernelListing | None:
        data = json.loads(text)
        if data.get("format") != _LISTING_FORMAT or data.get("repo") != kernel.repo_id:
            return None
        releases = tuple(Release(tag, commit, tuple(variants))
                         for tag, commit, variants in data["releases"])
        return cls(kernel, releases, float(data["listed_at"]))


@dataclass
class _KernelState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    listing: KernelListing | None = None
    retry_at: float = 0.0


class Catalog:
    """The listings of every served kernel, each refreshed after ``ttl`` seconds."""

    def __init__(self, kernels: Sequence[Kernel], hub: Hub, store: Path, ttl: float,
                 events: EventLog, clock: Callable[[], float] = time.time) -> None:
        self.kernels = {k.project: k for k in kernels}
        self.hub, self.store, self.ttl = hub, store, ttl
        self.events, self.clock = events, clock
        self._state = {k.repo_id: _KernelState() for k in kernels}

    def kernel(self, project: str) -> Kernel | None:
        return self.kernels.get(canonicalize_name(project))

    def fresh(self, kernel: Kernel) -> KernelListing | None:
        """The listing if it is within its TTL, without waiting for anything."""
        listing = self._state[kernel.repo_id].listing
        if listing is not None and self.clock() - listing.listed_at < self.ttl:
            return listing
        return None

    def listing(self, kernel: Kernel) -> KernelListing:
        """The kernel's listing, refreshed from the Hub when older than the TTL; the
        last one (marked stale) when the Hub fails. Blocks: call it from a thread."""
        state = self._state[kernel.repo_id]
        if (fresh := self.fresh(kernel)) is not None:
            return fresh
        with state.lock:  # one refresh per kernel at a time; the others wait for it
            if (fresh := self.fresh(kernel)) is not None:
                return fresh
            if state.listing is None:
                state.listing = self._load(kernel)
            known = state.listing
            if known is not None and self.clock() < state.retry_at:
                return known
            try:
                listing = self._fetch(kernel, known)
            except SourceError as exc:
                state.retry_at = self.clock() + min(self.ttl, RETRY_AFTER_FAILURE)
                self.events.write("hub-unavailable", repo=kernel.repo_id, reason=exc.message,
                                  serving="stale listing" if known else "nothing")
                if known is None:
                    raise ListingUnavailableError(
                        f"cannot list {kernel.repo_id}: {exc.message}") from None
                state.listing = KernelListing(known.kernel, known.releases, known.listed_at,
                                              exc.message)
                return state.listing
            state.listing, state.retry_at = listing, 0.0
            self._save(listing)
            return listing

    def listings(self) -> list[KernelListing]:
        """Every kernel's listing; kernels that cannot be listed at all are left out
        (and logged). Blocks."""
        found = []
        for kernel in self.kernels.values():
            try:
                found.append(self.listing(kernel))
            except ListingUnavailableError:
                continue
        return found

    def find(self, project: str, filename: str) -> ServedWheel | None:
        """The listed wheel of that name. A name found in the current listing, even a
        stale one, needs no Hub call: a release's files never change names. Blocks."""
        kernel = self.kernel(project)
        if kernel is None:
            return None
        state = self._state[kernel.repo_id]
        if state.listing is None:
            state.listing = self._load(kernel)
        known = state.listing
        if known is not None and filename in known.by_filename:
            return known.by_filename[filename]
        return self.listing(kernel).by_filename.get(filename)

    def forget(self, kernel: Kernel) -> None:
        """Ask the Hub again on the next request (a tag moved under a conversion)."""
        state = self._state[kernel.repo_id]
        with state.lock:
            if state.listing is not None:
                state.listing = KernelListing(state.listing.kernel, state.listing.releases, 0.0)

    def status(self) -> dict[str, int]:
        listings = [s.listing for s in self._state.values()]
        return {"kernels": len(self._state),
                "listed": sum(listing is not None for listing in listings),
                "stale": sum(listing is not None and listing.stale_reason is not None
                             for listing in listings)}

    # -- the Hub and the store ---------------------------------------------------------
    def _fetch(self, kernel: Kernel, known: KernelListing | None) -> KernelListing:
        """A new listing; a commit already known keeps its variants (they never change)."""
        asked_at = self.clock()
        tags = self.hub.release_tags(kernel.repo_id)
        known_variants = {r.commit: r.variants for r in known.releases} if known else {}
        releases = []
        ordered = sorted((version, tag) for tag in tags if (version := tag_version(tag)))
        for _version, tag in ordered:
            commit = tags[tag]
            variants = known_variants.get(commit)
            if variants is None:
                try:
                    variants = tuple(self.hub.variant_names(kernel.repo_id, tag, commit))
                except (NetworkError, AuthenticationError, RepoNotFoundError):
                    raise
                except SourceError as exc:  # a release without build/: nothing to serve
                    self.events.write("release-skipped", repo=kernel.repo_id, tag=tag,
                                      reason=exc.message)
                    variants = ()
            releases.append(Release(tag, commit, variants))
        if known is None or [(r.tag, r.commit) for r in known.releases] != \
                [(r.tag, r.commit) for r in releases]:
            self.events.write("listed", repo=kernel.repo_id,
                              releases=[r.tag for r in releases],
                              wheels=sum(len(r.variants) for r in releases))
        return KernelListing(kernel, tuple(releases), asked_at)

    def _path(self, kernel: Kernel) -> Path:
        return self.store / (kernel.repo_id.replace("/", "--") + ".json")

    def _load(self, kernel: Kernel) -> KernelListing | None:
        try:
            return KernelListing.from_json(kernel, self._path(kernel).read_text())
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none yet, or unreadable: the Hub will tell

    def _save(self, listing: KernelListing) -> None:
        path = self._path(listing.kernel)
        temp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(listing.to_json())
            temp.replace(path)
        except OSError as exc:
            self.events.write("listing-not-saved", repo=listing.kernel.repo_id,
                              reason=exc.strerror or str(exc))


def all_wheels(listings: Iterable[KernelListing]) -> list[ServedWheel]:
    return [wheel for listing in listings for wheel in listing.wheels]
