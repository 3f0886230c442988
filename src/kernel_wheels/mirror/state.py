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

Every record is read as hostile (edited by hand, by an attacker, or left by an older
version): each field's type and form is checked, a record is tied to the key it is
stored under (a pending record to its repository, version, variant and commit; a state's
records to its repository), every wheel and object a record names is one of its own
repository's project (so folding, pruning or collecting garbage can never touch another
project's objects), and anything else is one :class:`~kernel_wheels.errors.DistributionError`
line naming the record, before anything is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from packaging.utils import canonicalize_name

from ..confine import commit_id, file_name, shown
from ..errors import DistributionError, UnsafeNameError, UsageError
from ..kernel.repo_id import check_repo_id, is_repo_id
from ..reading import parse_json
from ..site.pages import FILES
from .store import Destination

ROOT = ".kernel-wheels/mirror"
STATE = f"{ROOT}/state"
PENDING = f"{ROOT}/pending"
PAGES = f"{ROOT}/pages.json"
FORMAT = 1
#: Objects read at once.
READERS = 16
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: Versions, variants, tags and wheel names as the mirror writes them.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,254}")


_SHA256 = re.compile(r"[0-9a-f]{64}")
#: A project name as :func:`project_of` gives it (canonical, PEP 503): no dot, no slash.
_PROJECT = re.compile(r"\w[\w-]*")
#: ``Requires-Python`` and yank reasons: one printable line of reasonable length.
_TEXT = re.compile(r"[^\x00-\x1f\x7f-\x9f]{0,1000}")


@lru_cache(maxsize=4096)  # asked for each record read: a mirror has few repositories
def project_of(repo: str) -> str:
    """The project a repository's wheels are (canonical): the name part of its id, as
    ``HubSource.distribution`` names them. ``x/k-a`` and ``x/k_a`` give one project, and
    so do ``x/ka`` and ``y/ka``."""
    return canonicalize_name(repo.split("/")[-1])


def owns_wheel(project: str, wheel: str) -> bool:
    """Whether ``wheel`` (a plain name) is a wheel file of ``project``."""
    return wheel.startswith(project.replace("-", "_") + "-") and wheel.endswith(".whl") \
        and bool(_NAME.fullmatch(wheel))


def read_json(raw: bytes, where: str, remedy: str) -> Any:
    """A record's JSON: anything that is not JSON (bad UTF-8, nesting that exhausts the
    parser) is one line naming the record and what to do."""
    try:
        return parse_json(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else shown(str(exc), 80)
        raise DistributionError(f"{where} is not JSON ({reason}); {remedy}") from None


def _invalid(where: str, what: str, remedy: str) -> DistributionError:
    return DistributionError(f"{where}: not a mirror record ({what}); {remedy}")


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
    def from_dict(cls, raw: Any, where: str, repo: str | None = None, remedy: str = "remove it") -> Record:
        """``repo``: the repository whose record this must be (the key it is stored
        under names it); ``remedy``: what the error line tells a person to do."""
        if not isinstance(raw, dict) or not raw.keys() <= _FIELDS or not raw.keys() >= _REQUIRED:
            raise _invalid(where, "not an object of a record's fields", remedy)
        record = cls(**raw)
        for name in _STRINGS:
            if not isinstance(getattr(record, name), str):
                raise _invalid(where, f"{name} is not a string", remedy)
        if type(record.size) is not int or record.size < 0:
            raise _invalid(where, "size is not a number of bytes", remedy)
        if not _SHA256.fullmatch(record.sha256) or not _SHA256.fullmatch(record.metadata_sha256):
            raise _invalid(where, "a sha256 is not 64 hexadecimal digits", remedy)
        for name in ("requires_python", "yanked"):
            value = getattr(record, name)
            if value is not None and not (isinstance(value, str) and _TEXT.fullmatch(value)):
                raise _invalid(where, f"{name} is not one line of text", remedy)
        check_repo_id(record.repo, where)
        if repo is not None and record.repo != repo:
            raise _invalid(where, f"it names {shown(record.repo)}, stored under {repo}", remedy)
        if not _COMMIT.fullmatch(record.commit):
            commit_id(record.commit, where)  # raises, with its message
        for name in (record.version, record.variant, record.wheel, record.tag):
            if not _NAME.fullmatch(name):  # a narrower test than file_name(), and faster
                file_name(name, where)
                raise UnsafeNameError(f"{where}: {shown(repr(name))} is not a plain name")
        project = project_of(record.repo)
        if record.project != project or not owns_wheel(project, record.wheel) \
                or record.wheel[len(project) + 1:].partition("-")[0].partition("+")[0] != record.version:
            raise _invalid(where, f"{shown(record.wheel)} is no wheel of {record.repo}'s project "
                                  f"{project} {record.version}", remedy)
        return record


_FIELDS = frozenset(Record.__dataclass_fields__)
_REQUIRED = _FIELDS - {"yanked"}
_STRINGS = ("repo", "version", "tag", "commit", "variant", "wheel", "project", "sha256", "metadata_sha256")


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
    where = f"{store.description}/{key}"
    remedy = "restore it, or remove it to convert that repository again"
    data = read_json(raw, where, remedy)
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("repo") != repo \
            or not isinstance(data.get("records"), list) or not isinstance(data.get("garbage", []), list):
        raise DistributionError(f"{where} cannot be read (not a state record of {repo} in format "
                                f"{FORMAT}); {remedy}")
    records = [Record.from_dict(r, where, repo, remedy) for r in data["records"]]
    project = project_of(repo)
    garbage = data.get("garbage", [])
    for item in garbage:  # deleted by a finish: only this repository's own objects
        name = item.removeprefix(f"{FILES}/").removesuffix(".metadata") if isinstance(item, str) else ""
        if not (isinstance(item, str) and item.startswith(f"{FILES}/") and owns_wheel(project, name)):
            raise DistributionError(f"{where} cannot be read (its garbage names {shown(repr(item), 80)}, "
                                    f"no object of the project {project}); {remedy}")
    return RepoState(repo, {r.key: r for r in records}, list(garbage))


def pending_keys(store: Destination, repo: str | None = None) -> list[str]:
    prefix = f"{PENDING}/{repo}/" if repo else f"{PENDING}/"
    return sorted(k for k in store.keys(prefix) if k.endswith(".json"))


def _pending_parts(key: str) -> tuple[str, str, str, str]:
    """(repository, version, variant, commit) of a pending record's key; one line for a
    key of another shape (an object put there by hand: its name is no record's)."""
    parts = key[len(PENDING) + 1:].split("/") if key.startswith(f"{PENDING}/") else []
    if len(parts) == 4 and parts[3].endswith(".json"):
        variant, _, commit = parts[3].removesuffix(".json").rpartition("@")
        repo = "/".join(parts[:2])
        if is_repo_id(repo) and _NAME.fullmatch(parts[2]) \
                and _NAME.fullmatch(variant) and _COMMIT.fullmatch(commit):
            return repo, parts[2], variant, commit
    raise DistributionError(f"{shown(key)} is not a pending record's key "
                            "(pending/<org>/<name>/<version>/<variant>@<commit>.json); remove it")


def repo_of_pending(key: str) -> str:
    return _pending_parts(key)[0]


def variant_of_pending(key: str) -> str:
    return _pending_parts(key)[2]


def parse_pending(key: str) -> tuple[str, str, str]:
    """(version, variant, commit) of a pending record's key."""
    return _pending_parts(key)[1:]


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
        where = f"{store.description}/{key}"
        record = Record.from_dict(read_json(raw, where, "remove it"), where, repo_of_pending(key))
        # Tied to its key: the plan reads only keys, and a record saying anything else
        # would fold into the state what the plan never saw.
        if (record.version, record.variant, record.commit) != parse_pending(key):
            raise _invalid(where, "its version, variant or commit is not the one its key names", "remove it")
        found.append(record)
    return found


def state_repos(store: Destination) -> list[str]:
    """The repositories with a state record; a ``.json`` key under ``state/`` that names
    no repository (put there by hand) is one line, not a key the finish reads or writes."""
    prefix = f"{STATE}/"
    repos = sorted(k[len(prefix):-len(".json")] for k in store.keys(prefix) if k.endswith(".json"))
    for repo in repos:
        if not is_repo_id(repo):
            raise DistributionError(f"{store.description}/{state_key(repo)} is not a state record's key "
                                    "(state/<org>/<name>.json); remove it")
    return repos


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
        where = f"{store.description}/{PAGES}"
        remedy = "restore it, or remove it (the next run writes every page again)"
        data = read_json(raw, where, remedy)
        try:
            return cls._checked(data)
        except (ValueError, KeyError, TypeError, AttributeError, UsageError, UnsafeNameError) as exc:
            reason = exc.message if isinstance(exc, UsageError | UnsafeNameError) else str(exc)
            raise DistributionError(f"{where} cannot be read ({shown(reason, 100)}); {remedy}") from None

    @classmethod
    def _checked(cls, data: Any) -> PagesRecord:
        """Every name is one the finish writes (it builds keys of pages to write and
        delete from them): target keys, canonical project names, repository ids."""
        from ..index.targets import parse_target_key

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a pages record in format {FORMAT}")
        targets = set(_strings(data["targets"], "targets"))
        for target in targets:
            parse_target_key(target)  # a UsageError naming it
        indexes: dict[str, set[str]] = {}
        for index, projects in _mapping(data["indexes"], "indexes").items():
            if index != "" and index not in targets:
                raise ValueError(f"the index {shown(repr(index), 60)} is not one of its targets")
            indexes[index] = {_project(p) for p in _strings(projects, "indexes")}
        owners = {}
        for project, repo in _mapping(data["owners"], "owners").items():
            if project != project_of(check_repo_id(repo, "owners")):
                raise ValueError(f"owners: {shown(repr(repo), 60)} does not give {shown(repr(project), 60)}")
            owners[project] = repo
        covered = {}
        for repo, digest in _mapping(data.get("covered", {}), "covered").items():
            if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
                raise ValueError("covered: not a digest")
            covered[check_repo_id(repo, "covered")] = digest
        dirty = {check_repo_id(r, "dirty") for r in _strings(data.get("dirty", []), "dirty")}
        return cls(targets, indexes, owners, covered, dirty)


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}: not a list of names")
    return value


def _mapping(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{name}: not an object")
    return value


def _project(name: str) -> str:
    if not _PROJECT.fullmatch(name) or canonicalize_name(name) != name:
        raise ValueError(f"{shown(repr(name), 60)} is not a project name")
    return name
