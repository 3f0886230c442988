"""The listing questions the Hub answers: which repositories an organisation has
(``mirror --org``), which releases a repository has, each with its variants (``serve``
and ``mirror``), and which variants of a commit carry a Sigstore bundle (``serve`` under
a policy that requires a signature).

A release is a ``vX.Y.Z`` tag, by the one release rule
(:func:`kernel_wheels.kernel.versions.tagged_releases`): two tags that spell one version on
one commit are one release; on different commits, one release with rivals (ambiguous:
each command that lists it says so, none converts it). Its variants are the folders
under ``build/`` at its commit; a release whose commit has no ``build/`` has none. Every
name from the Hub is checked before it is used (:mod:`.answers`,
:mod:`kernel_wheels.confine`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KernelWheelsError, SourceError, UnexpectedAnswerError
from ..kernel.repo_id import check_repo_id
from ..kernel.versions import TaggedRelease, tagged_releases
from .client import HubClient
from .failures import Failure, Kind, judge
from .repository import HubRepository

#: Answers from a Hub (or a Hub mirror) that does not offer a listing at all.
_NOT_OFFERED = frozenset({400, 404, 405, 501})


@dataclass(frozen=True)
class HubRelease:
    """A release as the Hub lists it."""

    release: TaggedRelease
    #: The folders under ``build/`` at its commit, sorted.
    variants: tuple[str, ...]
    #: One line when its commit has no ``build/`` folder (a release without builds).
    no_builds: str | None = None


def repository_releases(repository: HubRepository,
                        known: Mapping[str, tuple[str, ...]] | None = None) -> list[HubRelease]:
    """The repository's releases, oldest first. ``known``: {commit: variants} already
    listed; a commit's variants never change, so those commits are not asked again."""
    releases = []
    for release in tagged_releases(repository.release_tags()):
        variants = (known or {}).get(release.commit)
        if variants is not None:
            releases.append(HubRelease(release, variants))
            continue
        builds = repository.builds(release.commit)
        releases.append(HubRelease(release, tuple(builds or ()), None if builds else
                                   repository.no_build_folder(release.commit, builds)))
    return releases


#: The file a signed variant folder holds beside its metadata.json (docs/provenance.md).
BUNDLE = "metadata.json.sigstore"


def signed_variants(repository: HubRepository, commit: str) -> tuple[str, ...]:
    """The variant folders under ``build/`` at ``commit`` that hold a Sigstore bundle
    (``build/<variant>/metadata.json.sigstore``), sorted: one listing of ``build/``, every
    path checked as every listing is (:mod:`.answers`). Whether the bundle verifies is
    for the conversion to say; a folder without one cannot pass a policy that requires a
    signature. Offline: the folders of the HF cache's snapshot that hold one."""
    if repository.offline:
        build = repository.snapshot(commit) / "build"
        return tuple(sorted(p.parent.name for p in build.glob(f"*/{BUNDLE}"))) if build.is_dir() else ()
    return tuple(sorted({parts[1] for file in repository.files("build", commit)
                         if len(parts := file.path.split("/")) == 3 and parts[2] == BUNDLE}))


def organisation_repos(client: HubClient, org: str,
                       warn: Callable[[str], None] = lambda _: None) -> list[str]:
    """The kernel repositories of an organisation: the Hub's listing of its ``kernel``-type
    repositories (``GET /api/kernels?author=ORG``) and of its ``model``-type ones
    (``GET /api/models?author=ORG``: kernels published before the kernel type). A Hub
    mirror may offer only one of them (404 and the like); both missing is an error, and so
    is any other failure of either, at once: a listing cut short would drop repositories
    silently. Only repositories of ``org`` are taken (Hub ids compare case-insensitively):
    one of another author that a listing names is skipped, with a ``warn`` line. Pages are
    followed on the Hub's own origin only (:meth:`HubClient.pages`)."""
    found: set[str] = set()
    not_offered = []
    for kind in ("kernel", "model"):
        where = f"--org {org}: the Hub's {kind} listing"
        try:
            for page in client.pages(f"/api/{kind}s", {"author": org}, where,
                                     f"{org}'s {kind} repositories", retry=True):
                found.update(_listed_ids(page, where))
        except KernelWheelsError:
            raise
        except Exception as exc:
            failure = judge(exc, client.offline)
            if failure is None:
                raise
            if failure.status in _NOT_OFFERED:
                not_offered.append(f"{kind} listing: HTTP {failure.status}")
                continue
            raise _listing_failed(client, org, kind, where, failure) from None
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


def _listing_failed(client: HubClient, org: str, kind: str, where: str,
                    failure: Failure) -> SourceError:
    """A listing that failed, asked once: a run without it would miss repositories."""
    if failure.status is not None:
        return SourceError(f"{where} failed: HTTP {failure.status}")
    if failure.kind is Kind.UNEXPECTED:  # HTML or garbage: a server without the listing API
        return SourceError(f"{where} is not offered there: {client.shown_endpoint} answered "
                           f"/api/{kind}s?author={org} with something that is not a JSON "
                           "listing (a Hub mirror may not list organisations): name the "
                           "repositories instead (REPO ...)")
    return SourceError(f"{where} failed: {failure.reason}")  # no answer


def _listed_ids(page: Any, where: str) -> list[str]:
    """The repository ids on one page of an author listing: a JSON list of objects."""
    if not isinstance(page, list) or not all(isinstance(i, dict) and isinstance(i.get("id"), str)
                                              for i in page):
        raise UnexpectedAnswerError(f"{where}: a page is not a list of repositories")
    return [item["id"] for item in page]
