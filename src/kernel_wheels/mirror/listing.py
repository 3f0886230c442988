"""Which repositories, releases and variants a mirror run covers: the repositories named,
every repository of an organisation, each with its releases as the Hub lists them
(:mod:`kernel_wheels.hub.listing`), and each locked kernel's release at its locked commit
(a ``kernels.lock``). :func:`gather` assembles them, for the command and the API alike.

A release is a ``vX.Y.Z`` tag. Two tags that spell one version on different commits
(``v1.1.2``, ``v1.01.2``) make the release ambiguous: listed, and refused. Every name
from the Hub is checked before it is used (:mod:`kernel_wheels.confine`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..confine import file_name
from ..errors import SourceError
from ..kernel.repo_id import check_repo_id
from ..kernel.selection import VariantFilter

if TYPE_CHECKING:
    from ..hub.client import HubClient
    from ..network import NetworkSettings
    from ..sources.hub import HubSource


@dataclass(frozen=True)
class ListedRelease:
    version: str  # public, normalised: "1.1.2"
    tag: str
    commit: str
    variants: tuple[str, ...]
    #: Why it cannot be converted (two tags spell its version), or None.
    refused: str | None = None


@dataclass(frozen=True)
class RepoListing:
    repo: str
    releases: tuple[ListedRelease, ...]
    #: {variant: kernels.lock hash} when a lock drives the run (downloads are checked).
    locked: Mapping[str, str] | None = field(default=None, compare=False)
    #: Every version the Hub has (a lock lists one): a record of another is yanked.
    present: frozenset[str] | None = None

    @property
    def versions(self) -> frozenset[str]:
        return self.present if self.present is not None else frozenset(r.version for r in self.releases)

    @property
    def variants(self) -> int:
        return sum(len(r.variants) for r in self.releases)

    @cached_property
    def digest(self) -> str:
        """Changes when anything listed changes (a release, a tag's commit, a variant)."""
        text = json.dumps([self.repo, sorted([r.version, r.tag, r.commit, sorted(r.variants), r.refused]
                                             for r in self.releases)])
        return hashlib.sha256(text.encode()).hexdigest()


class Lister(Protocol):
    def list(self, repo: str) -> RepoListing:
        ...


class HubLister:
    """Listings from the Hub (:mod:`kernel_wheels.hub`: HF_ENDPOINT, HF_TOKEN, retries,
    one-line errors), and the Hub sources the releases are converted from."""

    def __init__(self, network: NetworkSettings | None = None, repo_type: str | None = None,
                 warn: Callable[[str], None] = lambda _: None) -> None:
        self.network, self.repo_type = network, repo_type
        #: Hears each listing question tried again (the client's retry warnings).
        self.warn = warn

    @cached_property
    def client(self) -> HubClient:
        """Made on the first listing (HF_ENDPOINT checked then, as a source checks it)."""
        from ..hub.client import open_client

        return open_client(self.network, self.warn)

    def source(self, repo: str, locked: Mapping[str, str] | None = None) -> HubSource:
        from ..sources.hub import HubSource

        return HubSource(repo, repo_type=self.repo_type, network=self.network, locked_variants=locked)

    def list(self, repo: str) -> RepoListing:
        from ..hub.listing import repository_releases
        from ..hub.repository import HubRepository

        check_repo_id(repo, "a repository to mirror")
        releases = []
        for found in repository_releases(HubRepository(self.client, repo, self.repo_type)):
            release = found.release
            variants = tuple(sorted(file_name(n, f"{repo}: build/ at {release.tag}")
                                    for n in found.variants))
            releases.append(ListedRelease(str(release.version), release.tag, release.commit, variants,
                                          release.ambiguity(repo)))
        return RepoListing(repo, tuple(releases))


def locked_listings(lock_path: Path, lister: HubLister, filters: VariantFilter) -> list[RepoListing]:
    """Each locked kernel's release at its locked commit, its variants' listings checked
    against the lock before anything is downloaded (``locked.pipeline.verify``)."""
    from ..convert.pipeline import ConvertOptions
    from ..locked.lockfile import read_lock
    from ..locked.pipeline import verify

    lock = read_lock(lock_path)
    listings = []
    for kernel in lock.kernels:
        full = lister.list(kernel.repo_id)
        at_commit = [r for r in full.releases if r.commit == kernel.commit]
        if not at_commit:
            raise SourceError(f"{kernel.repo_id}: the locked commit {kernel.commit[:12]} is no "
                              "release (no vX.Y.Z tag points at it); the mirror holds releases only")
        verify(kernel, lister.source(kernel.repo_id, kernel.variants),
               ConvertOptions(filters=filters), lambda _: None)
        listings.append(RepoListing(kernel.repo_id, tuple(at_commit[-1:]), kernel.variants,
                                    full.versions))
    return listings


def gather(lister: HubLister, repos: Sequence[str] = (), orgs: Sequence[str] = (),
           lock: Path | None = None, filters: VariantFilter | None = None,
           warn: Callable[[str], None] = lambda _: None) -> list[RepoListing]:
    """Every listing a run covers: the repositories named and those of each organisation
    (:func:`kernel_wheels.hub.listing.organisation_repos`; each repository once, in the
    order named), then each locked kernel's release (:func:`locked_listings`, with the
    variant ``filters`` the run converts). ``warn`` hears of what an organisation's
    listing names and is skipped."""
    from ..hub.listing import organisation_repos

    named = list(repos)
    for org in orgs:
        named += organisation_repos(lister.client, org, warn=warn)
    listings = [lister.list(repo) for repo in dict.fromkeys(named)]
    if lock is not None:
        listings += locked_listings(lock, lister, filters or VariantFilter())
    return listings
