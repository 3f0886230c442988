"""Which repository gives a project in a destination, decided before anything is written.

Two repositories can give one project (``x/k-a`` and ``x/k_a``, ``x/ka`` and ``y/ka``):
their wheels have the same names, so the second one's would overwrite the first one's
objects under the pages' old sha256 (every ``pip install`` of that release would fail its
hash check). So a project belongs to one repository, recorded in an ownership record,
``.kernel-wheels/mirror/owners/<project>.json``, created with the store's conditional put
(the lease's primitive) before the first object of that repository is written: of two
runs at once, one creates it and the other finds it and refuses. Records are never
rewritten; giving a project to another repository is a person's decision (remove the
record and the old repository's state).

A destination written before ownership records existed has its owners in ``pages.json``
and its state records: those count as claims (and the owner's next run with work
records its claim).

Within one run, two repositories of one project of which neither is the owner yet are
both refused: which one a run (or each of N shards, listing the same repositories)
would take must not depend on order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..confine import shown
from ..errors import DistributionError
from ..kernel.repo_id import check_repo_id
from .state import ROOT, PagesRecord, encode, project_of, read_json, state_repos
from .store import Destination

OWNERS = f"{ROOT}/owners"


def owner_key(project: str) -> str:
    return f"{OWNERS}/{project}.json"


@dataclass(frozen=True)
class Refusal:
    repo: str
    reason: str


class Owners:
    """The owners of a destination's projects, read once per project per run."""

    def __init__(self, store: Destination, pages: PagesRecord) -> None:
        self.store = store
        self._read: dict[str, str | None] = {}
        self._legacy: dict[str, str] | None = None
        self._pages = pages

    def _record(self, project: str) -> str | None:
        if project not in self._read:
            self._read[project] = self._parse(project, self.store.get(owner_key(project)))
        return self._read[project]

    def _parse(self, project: str, raw: bytes | None) -> str | None:
        if raw is None:
            return None
        where = f"{self.store.description}/{owner_key(project)}"
        remedy = "restore it, or remove it (the repository whose state gives the project owns it then)"
        data = read_json(raw, where, remedy)
        repo = data.get("repo") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("project") != project or not isinstance(repo, str) \
                or project_of(check_repo_id(repo, where)) != project:
            raise DistributionError(f"{where} is not the ownership record of {project} "
                                    f"({shown(repr(data), 80)}); {remedy}")
        return repo

    def _before(self, project: str) -> str | None:
        """The owner a destination written before ownership records names: pages.json's,
        else the (first) repository whose state gives the project."""
        if self._legacy is None:
            self._legacy = dict(self._pages.owners)
            for repo in state_repos(self.store):
                self._legacy.setdefault(project_of(repo), repo)
        return self._legacy.get(project)

    def owner(self, project: str) -> str | None:
        return self._record(project) or self._before(project)

    def claim(self, repo: str) -> str:
        """Make ``repo`` the owner of its project unless it has one; returns the owner."""
        project = project_of(repo)
        if self._record(project) is None:
            before = self._before(project)
            if before is not None and before != repo:
                return before
            body = encode({"project": project, "repo": repo})
            if self.store.put(owner_key(project), body, if_absent=True):
                self._read[project] = repo
            else:  # another run claimed it meanwhile: its claim counts
                self._read[project] = self._parse(project, self.store.get(owner_key(project)))
        return self._record(project) or repo

    def decide(self, repos: Iterable[str], listed: Iterable[str], *, write: bool) -> list[Refusal]:
        """Which of ``repos`` (those with work) may write: an owner, or a repository of a
        project nobody owns that no other repository of ``listed`` (this run's) gives.
        The others are refused. ``write``: record the claims (not in a dry run)."""
        by_project: dict[str, set[str]] = {}
        for repo in listed:
            by_project.setdefault(project_of(repo), set()).add(repo)
        refused = []
        for repo in sorted(set(repos)):
            project = project_of(repo)
            owner = self.owner(project)
            rivals = sorted(by_project.get(project, set()) - {repo})
            if owner is None and rivals:
                refused.append(Refusal(repo, f"{repo} and {', '.join(rivals)} both give the project "
                                             f"{project}, which neither does in this destination yet; "
                                             "mirror them into different destinations"))
                continue
            if owner is None or owner == repo:
                owner = self.claim(repo) if write else repo
            if owner != repo:
                refused.append(Refusal(repo, f"{owner} gives the project {project} in this destination; "
                                             f"mirror {repo} into another destination"))
        return refused

