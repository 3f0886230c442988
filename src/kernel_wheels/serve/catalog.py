"""What the server offers: every release tag of every kernel, the variants each has,
and the wheel file name each variant gives, from the Hub's listing alone.

A release is a ``vX.Y.Z`` tag. Its variants are the folders under ``build/`` at the
tag's commit (:func:`kernel_wheels.hub.listing.repository_releases`), and each one's
wheel file name is :func:`kernel_wheels.wheel.plan.plan_wheel` with the default tag
options: index pages need no download and no conversion.

Hub answers are kept for ``ttl`` seconds. A commit's variants never change, so they
are asked for once; a refresh of a known repository is one call (its refs). Every
listing is also written to the cache folder, so that a server restarted while the Hub
is down still knows what it served. When a refresh fails, the last listing is served
("stale") and the Hub is not asked again for a while, so that an outage does not make
every request wait for its timeouts.

Every Hub answer is hostile until checked: a commit id must be one (40 or 64 hex digits:
it becomes a folder of the wheel cache), a variant name a plain file name, and an answer
huggingface_hub cannot read (HTML, garbage, a wrong shape) is a Hub failure with one line,
never an exception escaping to a request. Listings read back from the cache folder are
checked the same way. Two release tags that spell one version on different commits
(``v1.1.2`` and ``v1.01.2``) are listed once and marked ambiguous: their wheels are
refused, never converted.

Under a policy that requires a signature or a trusted publisher (docs/provenance.md), the
listing also says what the Hub can tell before any conversion: which variant folders hold
a Sigstore bundle (one listing of ``build/`` per new commit, kept with the listing), and
the publisher's ``trustedKernelPublisher`` flag (asked on each refresh; the last answer
kept when the Hub gives none). A wheel the policy refuses for either is marked
``refused``: no page lists it, and a request for it is answered with the reason.

Requests wait for a refresh on the event loop (:class:`~kernel_wheels.serve.flight.SingleFlight`):
one refresh per kernel runs in a pool of its own, and a request that already knows a
listing waits for it at most ``patience`` seconds before being answered from the one it
knows.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Protocol

from packaging.utils import canonicalize_name

from ..confine import commit_id, file_name, shown
from ..errors import (
    AmbiguousVersionError,
    KernelWheelsError,
    ListingUnavailableError,
    SourceError,
    UnsafeNameError,
    VariantError,
)
from ..hub.client import open_client
from ..hub.listing import HubRelease, repository_releases, signed_variants
from ..hub.repository import HubRepository
from ..kernel.variants import parse_variant
from ..kernel.versions import tag_version
from ..network import NetworkSettings
from ..provenance import Policy
from ..reading import parse_json, read_text
from ..wheel.plan import TagOptions, plan_wheel
from .flight import SingleFlight
from .logs import EventLog
from .settings import Kernel

#: After a failed refresh, the Hub is asked again after this many seconds at most.
RETRY_AFTER_FAILURE = 30.0
#: How long a request that knows a listing waits for its refresh before using it.
REFRESH_PATIENCE = 5.0
_LISTING_FORMAT = 3
_READABLE_FORMATS = (1, 2, 3)


class Hub(Protocol):
    """The question the catalog asks the Hub."""

    def releases(self, repo_id: str, known: Mapping[str, tuple[str, ...]]) -> list[HubRelease]:
        """The kernel's releases, each with the folders under ``build/`` at its commit;
        ``known``: {commit: variants} listed before (a commit's never change)."""
        ...

    def signed_variants(self, repo_id: str, commit: str) -> tuple[str, ...]:
        """The variant folders at ``commit`` that hold a Sigstore bundle."""
        ...

    def publisher_trust(self, repo_id: str) -> bool | None:
        """The Hub's trusted-publisher flag of the kernel's namespace (None: no answer)."""
        ...


class HubListing:
    """:class:`Hub` through :mod:`kernel_wheels.hub`, one repository per kernel
    (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, retries and one-line errors included; an
    answer that cannot be read is a Hub failure, never an exception of another kind).
    Give its client few retries: a stale page beats a page that waits."""

    def __init__(self, repositories: Mapping[str, HubRepository]) -> None:
        self.repositories = repositories

    def releases(self, repo_id: str, known: Mapping[str, tuple[str, ...]]) -> list[HubRelease]:
        return repository_releases(self.repositories[repo_id], known)

    def signed_variants(self, repo_id: str, commit: str) -> tuple[str, ...]:
        return signed_variants(self.repositories[repo_id], commit)

    def publisher_trust(self, repo_id: str) -> bool | None:
        return self.repositories[repo_id].client.publisher_flag(repo_id.split("/")[0])


def listing_repositories(kernels: Iterable[Kernel], repo_type: str | None, network: NetworkSettings,
                         notes: Callable[[str], Callable[[str], None]] | None = None,
                         ) -> dict[str, HubRepository]:
    """Per kernel, the Hub repository its listings are asked of (one retry at most; a
    kernel's ``notes`` hear its retries), over a client that keeps every failure a Hub
    failure. Made before the first request: making a client resets huggingface_hub's
    shared HTTP client (:func:`kernel_wheels.hub.client.open_client`)."""
    listing = NetworkSettings(network.timeout, min(network.retries, 1), network.backoff)
    return {k.repo_id: HubRepository(open_client(listing, notes(k.repo_id) if notes else lambda _: None,
                                                 contained=True), k.repo_id, repo_type)
            for k in kernels}


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
    #: Why the wheel is refused without a conversion (two tags spell its version).
    ambiguity: str | None = None
    #: Why the policy refuses it, known from the Hub's listing before any conversion (no
    #: bundle where a signature is required, a publisher that is not trusted).
    refused: str | None = None


@dataclass(frozen=True)
class Release:
    tag: str
    commit: str
    variants: tuple[str, ...]
    #: Other tags that spell the same version on other commits: (tag, commit).
    rivals: tuple[tuple[str, str], ...] = ()
    #: The variants that hold a Sigstore bundle (None: not asked).
    signed: tuple[str, ...] | None = None

    def ambiguity(self, repo_id: str) -> str | None:
        if not self.rivals:
            return None
        tags = [(self.tag, self.commit), *self.rivals]
        named = " and ".join(f"{tag} ({commit[:12]})" for tag, commit in tags)
        return (AmbiguousVersionError(
            f"{repo_id}: the tags {named} spell one version on different commits; which "
            "one is meant cannot be told, so neither is served").message)


def checked_release(where: str, tag: object, commit: object, variants: Iterable[object],
                    rivals: Iterable[Sequence[object]] = (),
                    signed: Iterable[object] | None = None) -> Release:
    """A release from a Hub answer or a stored listing (``where``), every name checked
    (:mod:`kernel_wheels.confine`): the commit becomes a folder of the cache, and a
    variant's name a filter and part of a file name (``signed``: the variants that hold
    a bundle, None when not asked)."""
    if not isinstance(tag, str) or tag_version(tag) is None:
        raise UnsafeNameError(f"{where}: {shown(repr(tag))} is not a release tag")
    checked_rivals = []
    for rival in rivals:
        rival_tag, rival_commit = rival
        if not isinstance(rival_tag, str) or tag_version(rival_tag) is None:
            raise UnsafeNameError(f"{where}: {shown(repr(rival_tag))} is not a release tag")
        checked_rivals.append((rival_tag, commit_id(rival_commit, f"{where} (tag {rival_tag})")))
    return Release(tag, commit_id(commit, f"{where} (tag {tag})"),
                   tuple(file_name(v, f"{where} (build/ at {tag})") for v in variants),
                   tuple(checked_rivals),
                   None if signed is None else tuple(file_name(v, f"{where} (build/ at {tag})")
                                                     for v in signed))


@dataclass(frozen=True)
class KernelListing:
    """The releases of one kernel as the Hub last told them."""

    kernel: Kernel
    releases: tuple[Release, ...]
    #: Wall-clock seconds when the Hub said so.
    listed_at: float
    #: Why the last refresh failed, while this listing is served stale.
    stale_reason: str | None = None
    #: The Hub's trusted-publisher flag (None: not asked, or no answer yet).
    trusted_publisher: bool | None = None
    #: What a wheel must prove to be served (what the Hub's listing can tell of it).
    policy: Policy = field(default_factory=Policy, compare=False)

    @cached_property
    def wheels(self) -> tuple[ServedWheel, ...]:
        wheels = []
        publisher = self._publisher_refusal()
        for release in self.releases:
            version = str(tag_version(release.tag))
            ambiguity = release.ambiguity(self.kernel.repo_id)
            for name in release.variants:
                try:
                    variant = parse_variant(name)
                except VariantError:
                    continue  # not a build variant (the conversion would skip it too)
                plan = plan_wheel(variant, self.kernel.project, version, TagOptions(),
                                  self.kernel.project)
                try:  # a version spelt with hundreds of digits: no file can have that name
                    file_name(plan.filename, f"{self.kernel.repo_id} {release.tag}")
                except UnsafeNameError:
                    continue
                wheels.append(ServedWheel(plan.filename, self.kernel, release.tag, version,
                                          release.commit, name, plan.requires_python, ambiguity,
                                          publisher or self._signature_refusal(release, name)))
        return tuple(wheels)

    def _publisher_refusal(self) -> str | None:
        repo = self.kernel.repo_id
        if self.trusted_publisher is True or self.policy.accepts_untrusted(repo):
            return None
        why = ("is not a trusted publisher on the Hub" if self.trusted_publisher is False
               else "could not be confirmed as a trusted publisher")
        return f"{repo}: publisher '{repo.split('/')[0]}' {why} (--trust-remote-code accepts it)"

    def _signature_refusal(self, release: Release, variant: str) -> str | None:
        if not self.policy.require_signature or (release.signed is not None and variant in release.signed):
            return None
        if release.signed is None:
            return (f"{self.kernel.repo_id} build/{variant}: whether it is signed is not known yet "
                    "(the Hub's listing of build/ was not read) and the policy requires a signature")
        return (f"{self.kernel.repo_id} build/{variant}: unsigned (no metadata.json.sigstore) and "
                "the policy requires a signature")

    @cached_property
    def by_filename(self) -> dict[str, ServedWheel]:
        return {wheel.filename: wheel for wheel in self.wheels}

    @property
    def ambiguities(self) -> list[str]:
        return [message for r in self.releases if (message := r.ambiguity(self.kernel.repo_id))]

    def to_json(self) -> str:
        return json.dumps({"format": _LISTING_FORMAT, "repo": self.kernel.repo_id,
                           "listed_at": self.listed_at, "trusted_publisher": self.trusted_publisher,
                           "releases": [[r.tag, r.commit, list(r.variants), [list(x) for x in r.rivals],
                                         None if r.signed is None else list(r.signed)]
                                        for r in self.releases]})

    @classmethod
    def from_json(cls, kernel: Kernel, text: str, policy: Policy | None = None) -> KernelListing | None:
        """The stored listing (this format, or one before it: without rivals, without
        bundles and the publisher's flag); None for another format or kernel. A name in
        it that could lead outside the cache is an :class:`UnsafeNameError`, as it would
        be from the Hub."""
        data = parse_json(text)
        if data.get("format") not in _READABLE_FORMATS or data.get("repo") != kernel.repo_id:
            return None
        where = f"the stored listing of {kernel.repo_id}"
        releases = tuple(checked_release(where, row[0], row[1], row[2], row[3] if len(row) > 3 else (),
                                         row[4] if len(row) > 4 else None)
                         for row in data["releases"])
        trusted = data.get("trusted_publisher")
        return cls(kernel, releases, float(data["listed_at"]),
                   trusted_publisher=trusted if isinstance(trusted, bool) else None,
                   policy=policy or Policy())


@dataclass(frozen=True)
class KernelHealth:
    """What ``/healthz`` says of one kernel."""

    repo: str
    #: "listed", "stale" (the last refresh failed; the listing before it is served),
    #: "unlisted" (no listing at all: its pages fail) or "not listed yet".
    state: str
    reason: str | None
    ambiguous: tuple[str, ...]


@dataclass
class _KernelState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    listing: KernelListing | None = None
    retry_at: float = 0.0
    #: Why the last refresh failed when there was no listing to fall back on.
    failure: str | None = None
    loaded: bool = False


class Catalog:
    """The listings of every served kernel, each refreshed after ``ttl`` seconds.
    ``refreshes`` runs the Hub calls (a pool of their own); ``store`` names the file a
    kernel's listing is kept in."""

    def __init__(self, kernels: Sequence[Kernel], hub: Hub, store: Callable[[str], Path],
                 ttl: float, events: EventLog, refreshes: SingleFlight[str, KernelListing],
                 clock: Callable[[], float] = time.time, patience: float = REFRESH_PATIENCE,
                 policy: Policy | None = None) -> None:
        self.kernels = {k.project: k for k in kernels}
        #: What a listed wheel must prove (what the Hub's listing tells of it, before any
        #: conversion): docs/provenance.md.
        self.policy = policy or Policy()
        self.hub, self.store, self.ttl = hub, store, ttl
        self.events, self.clock = events, clock
        self.refreshes, self.patience = refreshes, patience
        self._state = {k.repo_id: _KernelState() for k in kernels}

    def kernel(self, project: str) -> Kernel | None:
        return self.kernels.get(canonicalize_name(project))

    def fresh(self, kernel: Kernel) -> KernelListing | None:
        """The listing if it is within its TTL, without waiting for anything."""
        listing = self._state[kernel.repo_id].listing
        if listing is not None and self.clock() - listing.listed_at < self.ttl:
            return listing
        return None

    # -- on the event loop -----------------------------------------------------------
    async def current(self, kernel: Kernel) -> KernelListing:
        """The kernel's listing, refreshed first when older than the TTL. Holds no
        thread while the Hub answers; ListingUnavailableError when there is none. A
        request that knows a listing waits for a refresh it starts at most ``patience``
        seconds, and not at all for one already running."""
        if (fresh := self.fresh(kernel)) is not None:
            return fresh
        known = self._state[kernel.repo_id].listing
        if known is not None and self.refreshes.is_running(kernel.repo_id):
            return known
        refresh = self.refreshes.start(kernel.repo_id, partial(self.listing, kernel))
        if known is None:
            return await asyncio.shield(refresh)
        try:
            return await asyncio.wait_for(asyncio.shield(refresh), self.patience)
        except TimeoutError:  # the Hub is slow: what we know now, the refresh goes on
            return known

    async def listings(self) -> list[KernelListing]:
        """Every kernel's listing; kernels that cannot be listed at all are left out
        (they are logged, and named by /healthz)."""
        found = await asyncio.gather(*(self.current(k) for k in self.kernels.values()),
                                     return_exceptions=True)
        for result in found:
            if isinstance(result, BaseException) and not isinstance(result, ListingUnavailableError):
                raise result
        return [result for result in found if isinstance(result, KernelListing)]

    async def find(self, project: str, filename: str) -> ServedWheel | None:
        """The listed wheel of that name. A name found in the current listing, even a
        stale one, needs no Hub call: a release's files never change names."""
        kernel = self.kernel(project)
        if kernel is None:
            return None
        known = self._state[kernel.repo_id].listing
        if known is not None and filename in known.by_filename:
            return known.by_filename[filename]
        return (await self.current(kernel)).by_filename.get(filename)

    # -- in a thread -------------------------------------------------------------------
    def load_stored(self) -> None:
        """The listings saved by an earlier run (start-up; blocks)."""
        for kernel in self.kernels.values():
            state = self._state[kernel.repo_id]
            with state.lock:
                self._ensure_loaded(kernel, state)

    def list_unknown(self, pool: Executor) -> dict[str, str]:
        """List (from the Hub) every kernel with no stored listing, at start-up; returns
        {repo: why} of those that cannot be listed at all (health() then says
        "unlisted"). Blocks."""
        self.load_stored()
        unknown = [k for k in self.kernels.values() if self._state[k.repo_id].listing is None]

        def attempt(kernel: Kernel) -> str | None:
            try:
                self.listing(kernel)
            except ListingUnavailableError as exc:
                return exc.message
            return None

        failures = dict(zip((k.repo_id for k in unknown), pool.map(attempt, unknown), strict=True))
        return {repo: why for repo, why in failures.items() if why is not None}

    def _ensure_loaded(self, kernel: Kernel, state: _KernelState) -> None:
        if not state.loaded:
            state.loaded = True
            if state.listing is None:
                state.listing = self._load(kernel)

    def listing(self, kernel: Kernel) -> KernelListing:
        """The kernel's listing, refreshed from the Hub when older than the TTL; the
        last one (marked stale) when the Hub fails. Blocks: call it from a thread."""
        state = self._state[kernel.repo_id]
        if (fresh := self.fresh(kernel)) is not None:
            return fresh
        with state.lock:  # one refresh per kernel at a time; the others wait for it
            if (fresh := self.fresh(kernel)) is not None:
                return fresh
            self._ensure_loaded(kernel, state)
            known = state.listing
            if self.clock() < state.retry_at:
                if known is not None:
                    return known
                raise ListingUnavailableError(f"cannot list {kernel.repo_id}: {state.failure}")
            try:
                listing = self._fetch(kernel, known)
            except SourceError as exc:
                return self._refresh_failed(kernel, state, exc.message)
            state.listing, state.retry_at, state.failure = listing, 0.0, None
            self._save(listing)
            return listing

    def _refresh_failed(self, kernel: Kernel, state: _KernelState, reason: str) -> KernelListing:
        known = state.listing
        state.retry_at = self.clock() + min(self.ttl, RETRY_AFTER_FAILURE)
        self.events.write("hub-unavailable", repo=kernel.repo_id, reason=reason,
                          serving="stale listing" if known else "nothing")
        if known is None:
            state.failure = reason
            raise ListingUnavailableError(f"cannot list {kernel.repo_id}: {reason}")
        state.listing = replace(known, stale_reason=reason)
        return state.listing

    def forget(self, kernel: Kernel) -> None:
        """Ask the Hub again on the next request (a tag moved under a conversion)."""
        state = self._state[kernel.repo_id]
        with state.lock:
            if state.listing is not None:
                state.listing = replace(state.listing, listed_at=0.0, stale_reason=None)

    def status(self) -> dict[str, int]:
        health = self.health()
        return {"kernels": len(health),
                "listed": sum(k.state in ("listed", "stale") for k in health),
                "stale": sum(k.state == "stale" for k in health),
                "unlisted": sum(k.state == "unlisted" for k in health)}

    def health(self) -> list[KernelHealth]:
        found = []
        for repo, state in self._state.items():
            listing = state.listing
            if listing is not None:
                kind, reason = ("stale", listing.stale_reason) if listing.stale_reason else ("listed", None)
                ambiguous = tuple(listing.ambiguities)
            else:
                kind = "unlisted" if state.failure else "not listed yet"
                reason, ambiguous = state.failure, ()
            found.append(KernelHealth(repo, kind, reason, ambiguous))
        return found

    # -- the Hub and the store ---------------------------------------------------------
    def _fetch(self, kernel: Kernel, known: KernelListing | None) -> KernelListing:
        """A new listing; a commit already known keeps its variants (they never change).
        Tags of one version: one release, ambiguous if they are on different commits."""
        asked_at = self.clock()
        known_variants = {r.commit: r.variants for r in known.releases} if known else {}
        known_signed = {r.commit: r.signed for r in known.releases if r.signed is not None} \
            if known else {}
        releases = []
        for found in self.hub.releases(kernel.repo_id, known_variants):
            tagged = found.release
            checked = checked_release("the Hub's refs", tagged.tag, tagged.commit, (), tagged.rivals)
            if found.no_builds is not None:  # a release without build/: nothing to serve
                self.events.write("release-skipped", repo=kernel.repo_id, tag=tagged.tag,
                                  reason=found.no_builds)
            variants = self._names(kernel, tagged.tag, found.variants)
            signed = known_signed.get(checked.commit)
            if signed is None and self.policy.require_signature and variants:
                signed = self._names(kernel, tagged.tag,
                                     self.hub.signed_variants(kernel.repo_id, checked.commit))
            releases.append(Release(tagged.tag, checked.commit, variants, checked.rivals, signed))
        if known is None or [(r.tag, r.commit) for r in known.releases] != \
                [(r.tag, r.commit) for r in releases]:
            self.events.write("listed", repo=kernel.repo_id,
                              releases=[r.tag for r in releases],
                              wheels=sum(len(r.variants) for r in releases))
        for release in releases:
            if (ambiguity := release.ambiguity(kernel.repo_id)) is not None:
                self.events.write("ambiguous-version", repo=kernel.repo_id, reason=ambiguity)
        return KernelListing(kernel, tuple(releases), asked_at,
                             trusted_publisher=self._publisher(kernel, known), policy=self.policy)

    def _publisher(self, kernel: Kernel, known: KernelListing | None) -> bool | None:
        """The Hub's flag of now, where the policy needs it; the last answer when the
        Hub gives none (docs/provenance.md: the answer of now, else the kept one)."""
        if self.policy.accepts_untrusted(kernel.repo_id):
            return known.trusted_publisher if known else None
        now = self.hub.publisher_trust(kernel.repo_id)
        return now if now is not None else (known.trusted_publisher if known else None)

    def _names(self, kernel: Kernel, tag: str, names: Iterable[str]) -> tuple[str, ...]:
        """The variant names that are plain file names (never a path, never a filter)."""
        variants = []
        for name in names:
            try:
                variants.append(file_name(name, f"the Hub's listing of build/ at {tag}"))
            except UnsafeNameError as exc:
                self.events.write("name-refused", repo=kernel.repo_id, reason=exc.message)
        return tuple(variants)

    def _path(self, kernel: Kernel) -> Path:
        return self.store(kernel.repo_id.replace("/", "--") + ".json")

    def _load(self, kernel: Kernel) -> KernelListing | None:
        try:
            return KernelListing.from_json(kernel, read_text(self._path(kernel), "a cached listing",
                                                             ListingUnavailableError), self.policy)
        except KernelWheelsError as exc:  # a hostile name in it, or a link planted for it
            self.events.write("listing-refused", repo=kernel.repo_id, reason=exc.message)
            return None
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None  # none yet, or unreadable: the Hub will tell

    def _save(self, listing: KernelListing) -> None:
        try:
            path = self._path(listing.kernel)
            temp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
            path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(listing.to_json())
            temp.replace(path)
        except (OSError, KernelWheelsError) as exc:
            reason = exc.message if isinstance(exc, KernelWheelsError) else exc.strerror or str(exc)
            self.events.write("listing-not-saved", repo=listing.kernel.repo_id, reason=reason)


def all_wheels(listings: Iterable[KernelListing]) -> list[ServedWheel]:
    return [wheel for listing in listings for wheel in listing.wheels]
