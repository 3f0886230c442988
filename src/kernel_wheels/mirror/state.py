"""The state record a mirror keeps in its destination: what was converted from which
commit, and with which sha256.

- ``.kernel-wheels/mirror/state/<org>/<name>.json``: one repository's records (every
  wheel the mirror holds for it), written only by a run holding the lease;
- ``.kernel-wheels/mirror/pending/<org>/<name>/<version>/<variant>@<commit>.json``: one
  record a converting run (any shard) wrote after the wheel's objects; the next finish
  folds it into the repository's state. A name per commit: two writers of one key
  always write the same bytes;
- ``.kernel-wheels/mirror/pages.json``: the targets and, per index, the projects the
  pages were last written for.

Everything is sorted JSON without times or hosts: the same records give the same bytes,
whoever wrote them and in whichever order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from ..confine import commit_id, file_name, shown
from ..errors import DistributionError, UnsafeNameError
from .store import Destination

ROOT = ".kernel-wheels/mirror"
STATE = f"{ROOT}/state"
PENDING = f"{ROOT}/pending"
PAGES = f"{ROOT}/pages.json"
FORMAT = 1
#: Objects read at once.
READERS = 16
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: Versions, variants, tags and wheel names as the mirror writes them.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,254}")


def check_repo_id(repo: object, where: str) -> str:
    if not isinstance(repo, str) or not _REPO_ID.fullmatch(repo) or ".." in repo:
        raise UnsafeNameError(f"{where}: {shown(repr(repo))} is not a repository id (org/name)")
    return repo


@dataclass(frozen=True)
class Record:
    """One wheel of the mirror and where it came from."""

    repo: str
    version: str
    tag: str
    commit: str
    variant: str
    wheel: str
    project: str
    sha256: str
    size: int
    requires_python: str | None
    metadata_sha256: str
    #: PEP 592: None, or why the release is yanked ("" for no reason).
    yanked: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.repo, self.version, self.variant)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # asdict() copies deeply, ten times slower

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> Record:
        try:
            record = cls(**raw)
            if not isinstance(record.size, int) or not re.fullmatch(r"[0-9a-f]{64}", record.sha256):
                raise TypeError("size or sha256")
        except TypeError as exc:
            raise DistributionError(f"{where}: not a mirror record ({shown(str(exc), 80)})") from None
        check_repo_id(record.repo, where)
        if not _COMMIT.fullmatch(record.commit):
            commit_id(record.commit, where)  # raises, with its message
        for name in (record.version, record.variant, record.wheel, record.tag):
            if not _NAME.fullmatch(name):  # a narrower test than file_name(), and faster
                file_name(name, where)
                raise UnsafeNameError(f"{where}: {shown(repr(name))} is not a plain name")
        return record


def pending_key(record: Record) -> str:
    return f"{PENDING}/{record.repo}/{record.version}/{record.variant}@{record.commit}.json"


def state_key(repo: str) -> str:
    return f"{STATE}/{repo}.json"


def encode(data: Any) -> bytes:
    # Compact: json's C encoder (an indent takes the pure-Python one, 5x slower).
    return (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode()


@dataclass
class RepoState:
    repo: str
    records: dict[tuple[str, str, str], Record] = field(default_factory=dict)
    #: Object keys to delete once no page lists them (pruned wheels).
    garbage: list[str] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return encode({"format": FORMAT, "repo": self.repo,
                       "records": [r.to_dict() for _, r in sorted(self.records.items())],
                       "garbage": sorted(set(self.garbage))})

    def copy(self) -> RepoState:
        return RepoState(self.repo, dict(self.records), list(self.garbage))

    def yank(self, version: str, reason: str) -> int:
        changed = 0
        for key, record in self.records.items():
            if record.version == version and record.yanked != reason:
                self.records[key] = replace(record, yanked=reason)
                changed += 1
        return changed


def load_state(store: Destination, repo: str) -> RepoState:
    key = state_key(repo)
    raw = store.get(key)
    if raw is None:
        return RepoState(repo)
    try:
        data = json.loads(raw)
        if data.get("format") != FORMAT or data.get("repo") != repo:
            raise ValueError("another format or repository")
        records = [Record.from_dict(r, key) for r in data["records"]]
        garbage = [str(g) for g in data.get("garbage", [])]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DistributionError(f"{store.description}/{key} cannot be read ({shown(str(exc), 80)}); "
                                "restore it, or remove it to convert that repository again") from None
    return RepoState(repo, {r.key: r for r in records}, garbage)


def pending_keys(store: Destination, repo: str | None = None) -> list[str]:
    prefix = f"{PENDING}/{repo}/" if repo else f"{PENDING}/"
    return sorted(k for k in store.keys(prefix) if k.endswith(".json"))


def repo_of_pending(key: str) -> str:
    parts = key[len(PENDING) + 1:].split("/")
    return "/".join(parts[:2])


def variant_of_pending(key: str) -> str:
    return key.rsplit("/", 1)[-1].rpartition("@")[0]


def parse_pending(key: str) -> tuple[str, str, str]:
    """(version, variant, commit) of a pending record's key."""
    *_, version, name = key.split("/")
    variant, _, commit = name.removesuffix(".json").rpartition("@")
    return version, variant, commit


#: What the plan needs of a record: (commit, version, yank reason).
Known = tuple[str, str, str | None]


def load_pending(store: Destination, keys: Sequence[str]) -> list[Record]:
    found = []
    # Reads wait on the store (a disk, a bucket's round trips): several at once.
    with ThreadPoolExecutor(min(READERS, max(1, len(keys)))) as pool:
        contents = list(pool.map(store.get, keys))
    for key, raw in zip(keys, contents, strict=True):
        if raw is None:  # folded by another run meanwhile
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            raise DistributionError(f"{store.description}/{key} is not JSON; remove it") from None
        found.append(Record.from_dict(data, key))
    return found


def state_repos(store: Destination) -> list[str]:
    prefix = f"{STATE}/"
    return sorted(k[len(prefix):-len(".json")] for k in store.keys(prefix) if k.endswith(".json"))


@dataclass
class PagesRecord:
    targets: set[str] = field(default_factory=set)
    #: index ("" for simple/, else a target key) -> projects listed there.
    indexes: dict[str, set[str]] = field(default_factory=dict)
    #: project -> the repository that gives it.
    owners: dict[str, str] = field(default_factory=dict)
    #: repository -> the digest of the listing its state held every item of, when the
    #: pages were written (a re-run of that listing need not read the state).
    covered: dict[str, str] = field(default_factory=dict)
    #: Repositories a finish is writing the pages of (written before it folds any
    #: record, emptied at its end): a finish killed in between is redone by the next.
    dirty: set[str] = field(default_factory=set)

    def to_bytes(self) -> bytes:
        return encode({"format": FORMAT, "targets": sorted(self.targets),
                       "indexes": {k: sorted(v) for k, v in sorted(self.indexes.items())},
                       "owners": dict(sorted(self.owners.items())),
                       "covered": dict(sorted(self.covered.items())), "dirty": sorted(self.dirty)})

    @classmethod
    def load(cls, store: Destination) -> PagesRecord:
        raw = store.get(PAGES)
        if raw is None:
            return cls()
        try:
            data = json.loads(raw)
            return cls(set(data["targets"]), {k: set(v) for k, v in data["indexes"].items()},
                       dict(data["owners"]), dict(data.get("covered", {})), set(data.get("dirty", [])))
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls()  # every page is written again
