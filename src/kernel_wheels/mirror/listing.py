"""Which repositories, releases and variants exist: from the Hub (release tags and the
folders under ``build/`` at each tag's commit), from an organisation's repositories, or
from a ``kernels.lock`` (each locked kernel's release at its locked commit).

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
from typing import TYPE_CHECKING, Any, Protocol

from ..confine import commit_id, file_name
from ..errors import SourceError, UnexpectedAnswerError
from ..kernel.repo_id import check_repo_id
from ..kernel.revision import Revision
from ..kernel.versions import tag_version, tagged_releases

if TYPE_CHECKING:
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


def releases_from_tags(repo: str, tags: Mapping[str, str]) -> list[tuple[str, str, str, str | None]]:
    """(version, tag, commit, refusal) per version, oldest first (the release rule of
    :func:`~kernel_wheels.kernel.versions.tagged_releases`)."""
    checked = {tag: commit_id(commit, f"{repo}: tag {tag}") for tag, commit in tags.items()
               if tag_version(tag) is not None}
    found = []
    for release in tagged_releases(checked):
        rivals = [tag for tag, _ in release.rivals]
        refusal = (f"{repo}: the tags {release.tag} and {', '.join(rivals)} spell version "
                   f"{release.version} on different commits") if rivals else None
        found.append((str(release.version), release.tag, release.commit, refusal))
    return found


class HubLister:
    """Listings through :class:`~kernel_wheels.sources.hub.HubSource` (HF_ENDPOINT,
    HF_TOKEN, retries, one-line errors)."""

    def __init__(self, network: NetworkSettings | None = None, repo_type: str | None = None) -> None:
        self.network, self.repo_type = network, repo_type

    def source(self, repo: str, locked: Mapping[str, str] | None = None) -> HubSource:
        from ..sources.hub import HubSource

        return HubSource(repo, repo_type=self.repo_type, network=self.network, locked_variants=locked)

    def list(self, repo: str) -> RepoListing:
        check_repo_id(repo, "a repository to mirror")
        source = self.source(repo)
        releases = []
        for version, tag, commit, refusal in releases_from_tags(repo, source.release_tags()):
            releases.append(ListedRelease(version, tag, commit, self._variants(source, tag, commit),
                                          refusal))
        return RepoListing(repo, tuple(releases))

    @staticmethod
    def _variants(source: HubSource, tag: str, commit: str) -> tuple[str, ...]:
        try:
            names = source.variant_names(Revision(tag, tag, commit, None))
        except UnexpectedAnswerError:
            raise
        except SourceError as exc:
            if "no build/ folder" in exc.message:
                return ()  # a release without builds: nothing to mirror
            raise
        return tuple(sorted(file_name(n, f"{source.repo_id}: build/ at {tag}") for n in names))


#: Answers from a Hub (or a Hub mirror) that does not offer a listing at all.
_NOT_OFFERED = frozenset({400, 404, 405, 501})


def organisation_repos(org: str, network: NetworkSettings | None = None,
                       warn: Callable[[str], None] = lambda _: None) -> list[str]:
    """The kernel repositories of an organisation: the Hub's listing of its ``kernel``-type
    repositories (``GET /api/kernels?author=ORG``) and of its ``model``-type ones
    (``GET /api/models?author=ORG``: kernels published before the kernel type). A Hub
    mirror may offer only one of them (404 and the like); both missing is an error, and so
    is any other failure of either: a listing cut short would drop repositories silently.
    Only repositories of ``org`` are taken (Hub ids compare case-insensitively): one of
    another author that a listing names is skipped, with a ``warn`` line. Pages are
    followed on the Hub's own origin only (:func:`~kernel_wheels.sources.hub.hub_pages`)."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    from ..network import NetworkSettings, configure_hub_client
    from ..redaction import one_line
    from ..sources.hub import hub_pages

    # Before the first request, as a HubSource does: our timeout, and the hook that keeps
    # the token from any other host.
    configure_hub_client(network or NetworkSettings.from_environment())
    endpoint = constants.ENDPOINT.rstrip("/")
    found: set[str] = set()
    not_offered = []
    for kind in ("kernel", "model"):
        where = f"--org {org}: the Hub's {kind} listing"
        try:
            for page in hub_pages(endpoint, f"{endpoint}/api/{kind}s", {"author": org}, where,
                                  f"{org}'s {kind} repositories"):
                found.update(_listed_ids(page, where))
        except HfHubHTTPError as exc:
            status = getattr(exc.response, "status_code", None)
            if status in _NOT_OFFERED:
                not_offered.append(f"{kind} listing: HTTP {status}")
                continue
            raise SourceError(f"{where} failed: HTTP {status}") from None
        except ValueError:  # an answer that is no JSON: a server without the listing API
            raise SourceError(f"{where} is not offered there: {endpoint} answered "
                              f"/api/{kind}s?author={org} with something that is not a JSON "
                              "listing (a Hub mirror may not list organisations): name the "
                              "repositories instead (REPO ...)") from None
        except (OSError, httpx2.HTTPError) as exc:  # no answer
            reason = one_line(str(exc) or type(exc).__name__, limit=160)
            raise SourceError(f"{where} failed: {reason}") from None
    if len(not_offered) == 2:
        raise SourceError(f"--org {org}: the Hub did not list its repositories ({'; '.join(not_offered)})")
    repos = [check_repo_id(r, f"the Hub's repositories of {org}") for r in sorted(found)]
    for repo in repos:
        if repo.split("/")[0].casefold() != org.casefold():
            warn(f"warning: --org {org}: the Hub's listing names {repo}, a repository of another "
                 "organisation: skipped")
    repos = [r for r in repos if r.split("/")[0].casefold() == org.casefold()]
    if not repos:
        raise SourceError(f"--org {org}: the Hub lists no repositories of this organisation")
    return repos


def _listed_ids(page: Any, where: str) -> list[str]:
    """The repository ids on one page of an author listing: a JSON list of objects."""
    if not isinstance(page, list) or not all(isinstance(i, dict) and isinstance(i.get("id"), str)
                                              for i in page):
        raise UnexpectedAnswerError(f"{where}: a page is not a list of repositories")
    return [item["id"] for item in page]


def locked_listings(lock_path: Any, lister: HubLister, filters: Any) -> list[RepoListing]:
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


def dedupe(repos: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(repos))
