"""What a run does: a pure function of the listing, the state and the options.

An item is one (repository, version, variant). ``--shard K/N`` keeps the items whose
stable hash (sha256 of the three names) is K modulo N: every worker, given the same
listing, agrees on who does what without talking to the others, and the union of the
N shards is exactly the unsharded plan.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..errors import UsageError, VariantError
from ..kernel.selection import VariantFilter
from ..kernel.variants import parse_variant
from .listing import ListedRelease, RepoListing
from .state import Known


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not match or not 0 <= int(match[1]) < int(match[2]) <= 100_000:
            raise UsageError(f"--shard '{text}': give K/N with 0 <= K < N (K counts from 0, as "
                             "JOB_COMPLETION_INDEX and SLURM_ARRAY_TASK_ID do)")
        return cls(int(match[1]), int(match[2]))

    def owns(self, repo: str, version: str, variant: str) -> bool:
        if self.count == 1:
            return True
        digest = hashlib.sha256(f"{repo}\0{version}\0{variant}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class VersionSelection:
    """All releases (the default), those a specifier set admits, and/or the newest N of
    each major version."""

    specifier: SpecifierSet | None = None
    newest: int | None = None

    @classmethod
    def parse(cls, versions: str | None, newest: int | None) -> VersionSelection:
        spec = None
        if versions:
            try:
                spec = SpecifierSet(versions)
            except InvalidSpecifier:
                raise UsageError(f"--versions '{versions}' is not a version range like '>=1.2,<2'") from None
        if newest is not None and newest < 1:
            raise UsageError(f"--newest {newest}: give a number of releases of at least 1")
        return cls(spec, newest)

    def select(self, releases: Iterable[ListedRelease]) -> list[ListedRelease]:
        chosen = [r for r in releases
                  if self.specifier is None or self.specifier.contains(r.version, prereleases=True)]
        if self.newest is None:
            return chosen
        by_major: dict[int, list[ListedRelease]] = {}
        for release in chosen:
            by_major.setdefault(Version(release.version).major, []).append(release)
        kept = {r.version for group in by_major.values()
                for r in sorted(group, key=lambda r: Version(r.version))[-self.newest:]}
        return [r for r in chosen if r.version in kept]


@dataclass(frozen=True)
class Item:
    repo: str
    version: str
    tag: str
    commit: str
    variant: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.repo, self.version, self.variant)


#: add: new; skip: converted from this commit already; moved: converted from another
#: commit than the tag names now (left alone); replace: moved, and --replace-moved;
#: refused: cannot be converted (ambiguous tags).
KINDS = ("add", "replace", "skip", "moved", "refused")


@dataclass(frozen=True)
class Action:
    kind: str
    item: Item
    reason: str = ""


def plan_repo(listing: RepoListing, known: Mapping[tuple[str, str, str], Known],
              selection: VersionSelection, filters: VariantFilter, shard: Shard,
              replace_moved: bool) -> list[Action]:
    """The actions of one repository, in (version, variant) order."""
    actions = []
    kept: dict[str, bool] = {}  # a kernel's variants repeat in every release
    for release in sorted(selection.select(listing.releases), key=lambda r: Version(r.version)):
        for variant in release.variants:
            if variant not in kept:
                kept[variant] = _kept(variant, filters)
            if not kept[variant] or not shard.owns(listing.repo, release.version, variant):
                continue
            item = Item(listing.repo, release.version, release.tag, release.commit, variant)
            record = known.get(item.key)
            if release.refused:
                actions.append(Action("refused", item, release.refused))
            elif record is None:
                actions.append(Action("add", item))
            elif record[0] == item.commit:
                actions.append(Action("skip", item))
            else:
                kind = "replace" if replace_moved else "moved"
                actions.append(Action(kind, item, f"{release.tag} moved from {record[0][:12]} "
                                      f"to {item.commit[:12]}"))
    return actions


def count_items(listing: RepoListing, selection: VersionSelection, filters: VariantFilter,
                shard: Shard) -> int:
    """How many items :func:`plan_repo` would plan (all skipped, when the state is known to
    cover the listing)."""
    kept: dict[str, bool] = {}
    count = 0
    for release in selection.select(listing.releases):
        for variant in release.variants:
            if variant not in kept:
                kept[variant] = _kept(variant, filters)
            count += kept[variant] and shard.owns(listing.repo, release.version, variant)
    return count


def covered_items(listing: RepoListing) -> set[tuple[str, str, str]]:
    """(version, variant, commit) of every item of the listing a mirror can hold."""
    kept: dict[str, bool] = {}
    found = set()
    for release in listing.releases:
        if release.refused:
            continue
        for variant in release.variants:
            if variant not in kept:
                kept[variant] = _kept(variant, VariantFilter())
            if kept[variant]:
                found.add((release.version, variant, release.commit))
    return found


def _kept(variant: str, filters: VariantFilter) -> bool:
    try:
        return filters.matches(parse_variant(variant))
    except VariantError:
        return False  # not a build folder: to-wheel skips it too
