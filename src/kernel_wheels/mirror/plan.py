"""What a run does: a pure function of the listing, the state and the options.

An item is one (repository, version, variant). ``--shard K/N`` keeps the items whose
stable hash (sha256 of the three names) is K modulo N: every worker, given the same
listing, agrees on who does what without talking to the others, and the union of the
N shards is exactly the unsharded plan. ``--shard auto`` reads K and N from the batch
engine's own variables (:meth:`Shard.from_environment`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..errors import UsageError, VariantError
from ..kernel.selection import VariantFilter
from ..kernel.variants import parse_variant
from .listing import ListedRelease, RepoListing
from .state import Known

#: ``--shard auto``: K/N given as it is (a CI matrix, or one shard of an array run again by
#: hand); it wins over the engines' variables.
SHARD_VARIABLE = "KERNEL_WHEELS_SHARD"
#: ``--shard auto`` in a Kubernetes Indexed Job: N, which Kubernetes does not give a pod
#: (only ``JOB_COMPLETION_INDEX``); the manifest sets it to the Job's ``spec.completions``.
SHARD_COUNT_VARIABLE = "KERNEL_WHEELS_SHARD_COUNT"
_MAX_SHARDS = 100_000


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1
    #: Where ``--shard auto`` found it, for the run's log (empty for a K/N given).
    source: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str, environ: Mapping[str, str] | None = None) -> Shard:
        """``K/N``, or ``auto``: read from ``environ`` (:meth:`from_environment`)."""
        if text.strip() == "auto":
            return cls.from_environment(environ or {})
        shard = _k_of_n(text)
        if shard is None:
            raise UsageError(f"--shard '{text}': give K/N with 0 <= K < N (K counts from 0), or auto "
                             "to read it from the batch engine (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX)")
        return shard

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Shard:
        """The shard a batch engine gave this process, from its variables in ``environ``:

        - ``KERNEL_WHEELS_SHARD=K/N``, when set, as it is;
        - a Slurm array task: K = (``SLURM_ARRAY_TASK_ID`` - ``SLURM_ARRAY_TASK_MIN``) /
          ``SLURM_ARRAY_TASK_STEP``, N = ``SLURM_ARRAY_TASK_COUNT`` (``--array=0-3`` and
          ``--array=1-4`` both give 0/4 .. 3/4); the ids must be a range (``MIN-MAX[:STEP]``),
          else K would not be below N;
        - a Kubernetes Indexed Job: K = ``JOB_COMPLETION_INDEX``, N =
          ``KERNEL_WHEELS_SHARD_COUNT`` (the manifest sets it to ``spec.completions``).

        None of them, or a Slurm array and an Indexed Job at once, or values that do not
        agree with each other, is a :class:`UsageError` of one line."""
        env = {name: value.strip() for name, value in environ.items() if value.strip()}
        explicit = env.get(SHARD_VARIABLE)
        if explicit is not None:
            shard = _k_of_n(explicit)
            if shard is None:
                raise UsageError(f"--shard auto: {SHARD_VARIABLE}={_shown(explicit)}: give K/N with "
                                 "0 <= K < N (K counts from 0)")
            return replace(shard, source=f"{SHARD_VARIABLE}={explicit}")
        found = []
        if "SLURM_ARRAY_TASK_ID" in env:
            found.append(_slurm_array(env))
        if "JOB_COMPLETION_INDEX" in env or SHARD_COUNT_VARIABLE in env:
            found.append(_indexed_job(env))
        if len(found) > 1:
            raise UsageError(f"--shard auto: a Slurm array and a Kubernetes Indexed Job both name a shard "
                             f"({found[0].source}; {found[1].source}): set {SHARD_VARIABLE}=K/N or give "
                             "--shard K/N")
        if not found:
            raise UsageError("--shard auto: no batch engine gave this process a shard: run it as a Slurm "
                             "array task (SLURM_ARRAY_TASK_ID), in a Kubernetes Indexed Job "
                             f"(JOB_COMPLETION_INDEX with {SHARD_COUNT_VARIABLE}), set {SHARD_VARIABLE}=K/N, "
                             "or give --shard K/N")
        return found[0]

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


def in_part(repo: str, version: str, variant: str, selection: VersionSelection,
            filters: VariantFilter, shard: Shard) -> bool:
    """Whether an item the destination holds is in this run's part: its shard, a variant
    the filters keep, a version in ``--versions`` (``--newest`` chooses among the Hub's
    releases what to convert; it does not disown what is there)."""
    return shard.owns(repo, version, variant) and _kept(variant, filters) and \
        (selection.specifier is None or selection.specifier.contains(version, prereleases=True))


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


def _k_of_n(text: str) -> Shard | None:
    match = re.fullmatch(r"(\d{1,9})/(\d{1,9})", text.strip())
    if not match or not 0 <= int(match[1]) < int(match[2]) <= _MAX_SHARDS:
        return None
    return Shard(int(match[1]), int(match[2]))


def _shown(value: str) -> str:
    """An environment value in a message: quoted, on one line, cut."""
    return repr(value if len(value) <= 40 else value[:40] + "...")


def _whole(env: Mapping[str, str], name: str, needed_by: str) -> int:
    value = env.get(name)
    if value is None:
        raise UsageError(f"--shard auto: {needed_by} is set but {name} is not")
    if not re.fullmatch(r"\d{1,9}", value):
        raise UsageError(f"--shard auto: {name}={_shown(value)} is not a whole number")
    return int(value)


def _slurm_array(env: Mapping[str, str]) -> Shard:
    needed = "SLURM_ARRAY_TASK_ID (a Slurm array task)"
    task = _whole(env, "SLURM_ARRAY_TASK_ID", needed)
    count = _whole(env, "SLURM_ARRAY_TASK_COUNT", needed)
    low = _whole(env, "SLURM_ARRAY_TASK_MIN", needed)
    step = _whole(env, "SLURM_ARRAY_TASK_STEP", needed) if "SLURM_ARRAY_TASK_STEP" in env else 1
    high = _whole(env, "SLURM_ARRAY_TASK_MAX", needed) if "SLURM_ARRAY_TASK_MAX" in env \
        else low + (count - 1) * step
    ids = f"{low}-{high}" + (f":{step}" if step != 1 else "")
    if not (step >= 1 and 1 <= count <= _MAX_SHARDS and high == low + (count - 1) * step
            and low <= task <= high and (task - low) % step == 0):
        raise UsageError(f"--shard auto: Slurm array task {task} of ids {ids} with "
                         f"SLURM_ARRAY_TASK_COUNT={count} does not give one of N shards: submit the "
                         "array as a range (--array=0-N-1, or MIN-MAX[:STEP]), or give --shard K/N")
    return Shard((task - low) // step, count, source=f"Slurm array task {task} of {ids}")


def _indexed_job(env: Mapping[str, str]) -> Shard:
    if "JOB_COMPLETION_INDEX" not in env:
        raise UsageError(f"--shard auto: {SHARD_COUNT_VARIABLE} is set but JOB_COMPLETION_INDEX is not: "
                         "is the Job's completionMode Indexed?")
    index = _whole(env, "JOB_COMPLETION_INDEX", SHARD_COUNT_VARIABLE)
    if SHARD_COUNT_VARIABLE not in env:
        raise UsageError(f"--shard auto: JOB_COMPLETION_INDEX={index} needs the number of completions: "
                         f"set {SHARD_COUNT_VARIABLE} to the Job's spec.completions")
    count = _whole(env, SHARD_COUNT_VARIABLE, "JOB_COMPLETION_INDEX")
    if not index < count <= _MAX_SHARDS:
        raise UsageError(f"--shard auto: JOB_COMPLETION_INDEX={index} with {SHARD_COUNT_VARIABLE}={count}: "
                         f"set {SHARD_COUNT_VARIABLE} to the Job's spec.completions "
                         f"(at most {_MAX_SHARDS:,})")
    return Shard(index, count, source=f"Kubernetes Indexed Job index {index} of {count}")


def _kept(variant: str, filters: VariantFilter) -> bool:
    try:
        return filters.matches(parse_variant(variant))
    except VariantError:
        return False  # not a build folder: to-wheel skips it too
