"""Reading ``kernels.lock`` and the project it locks.

``kernels lock PROJECT`` writes ``PROJECT/kernels.lock`` for the kernels that
``PROJECT/pyproject.toml`` names under ``[tool.kernels.dependencies]`` (``"org/name" = 1``:
a major version). Two formats exist, and both are read:

- ``kernels`` 0.x: ``[{"repo_id": "org/name", "sha": "<commit>", "variants": {"<variant>":
  {"hash": "sha256-<hex>", "hash_type": "git_lfs_concat"}}}]`` (optionally with
  ``"kernel_depends"``, the same records of the kernels it loads, nested by repo id);
- ``kernels`` 0.17: ``[{"dependency": {"repo-id": "org/name", "version": 1},
  "lock": {"commit": "<commit>"}}]`` (dependencies of dependencies listed beside them).

Only the first carries per-variant hashes; with the second, a conversion is pinned to the
locked commit and each file is still checked against the Hub's listing as it downloads.
Every field is checked (repository ids, commit ids, variant names, hash syntax) and every
problem is one line naming the file and the entry.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..confine import commit_id, file_name, read_regular, shown
from ..errors import LockError, UnsafeNameError
from ..kernel.repo_id import is_repo_id
from ..reading import NestingError, parse_json, parse_toml

LOCK_FILE = "kernels.lock"
PROJECT_FILE = "pyproject.toml"
HASH_TYPE = "git_lfs_concat"
_HASH = re.compile(r"sha256-[0-9a-f]{64}")
#: A lock file larger than this is not one ``kernels lock`` wrote.
MAX_LOCK_SIZE = 16 << 20


@dataclass(frozen=True)
class LockedKernel:
    repo_id: str
    commit: str
    #: {variant: "sha256-<hex>"} (0.x locks); None when the lock records only the commit.
    variants: Mapping[str, str] | None = None


@dataclass(frozen=True)
class KernelsLock:
    path: Path  # the lock file
    kernels: tuple[LockedKernel, ...]

    def describe(self) -> str:
        return f"{len(self.kernels)} kernel(s) locked in {self.path}"


def read_lock(path: Path) -> KernelsLock:
    """The lock at ``path``: a ``kernels.lock`` file, or a project folder holding one (and
    the ``pyproject.toml`` whose dependencies it must lock)."""
    if path.is_dir():
        lock = _read_lock_file(path / LOCK_FILE)
        _refuse_unlocked(path / PROJECT_FILE, lock)
        return lock
    return _read_lock_file(path)


def _read_lock_file(path: Path) -> KernelsLock:
    try:
        # A regular file of bounded size: a FIFO would hang the read, /dev/zero never end it.
        raw = parse_json(read_regular(path, "the lock", LockError, MAX_LOCK_SIZE))
    except FileNotFoundError:
        raise LockError(f"{path} does not exist (make it with: kernels lock {path.parent})") from None
    except OSError as exc:
        raise LockError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, nesting
        raise LockError(f"{path} is not JSON: {shown(str(exc), 100)}") from None
    if not isinstance(raw, list) or not raw:
        raise LockError(f"{path} is not a kernels.lock: expected a non-empty list of locked kernels")
    kernels: dict[str, LockedKernel] = {}  # by the id in lower case: Hub ids ignore case
    for index, entry in enumerate(raw):
        try:
            found = _entry(entry, f"{path}, entry {index + 1}")
        except RecursionError:  # kernel_depends inside kernel_depends, hundreds deep
            raise LockError(f"{path}, entry {index + 1}: its kernel_depends are nested too deeply") from None
        for kernel in found:
            first = kernels.setdefault(kernel.repo_id.lower(), kernel)
            if first == _spelled(kernel, first.repo_id):
                continue
            if first.repo_id != kernel.repo_id:
                raise LockError(f"{path} locks {first.repo_id} and {kernel.repo_id}, one Hub "
                                "repository (ids ignore case), at different commits or hashes")
            raise LockError(f"{path} locks {kernel.repo_id} twice, differently")
    return KernelsLock(path, tuple(kernels[name] for name in sorted(kernels)))


def _spelled(kernel: LockedKernel, repo_id: str) -> LockedKernel:
    return LockedKernel(repo_id, kernel.commit, kernel.variants)


def _entry(entry: Any, where: str) -> list[LockedKernel]:
    if not isinstance(entry, dict):
        raise LockError(f"{where} is not an object")
    if "dependency" in entry or "lock" in entry:  # kernels 0.17
        dependency, lock = entry.get("dependency"), entry.get("lock")
        if not isinstance(dependency, dict) or not isinstance(lock, dict):
            raise LockError(f"{where}: 'dependency' and 'lock' must be objects")
        return [LockedKernel(_repo_id(dependency.get("repo-id"), where),
                             _commit(lock.get("commit"), where))]
    repo_id = _repo_id(entry.get("repo_id"), where)  # kernels 0.x
    variants = entry.get("variants")
    kernel = LockedKernel(repo_id, _commit(entry.get("sha"), where),
                          None if variants is None else _variants(variants, f"{where} ({repo_id})"))
    nested = entry.get("kernel_depends") or {}
    if not isinstance(nested, dict):
        raise LockError(f"{where}: 'kernel_depends' must be an object")
    found = [kernel]
    for name, dependency in nested.items():
        found += _entry(dependency, f"{where} -> {shown(str(name), 60)}")
    return found


def _repo_id(value: Any, where: str) -> str:
    if not is_repo_id(value):
        raise LockError(f"{where}: {shown(repr(value), 80)} is not a Hub repository id (org/name)")
    return value


def _commit(value: Any, where: str) -> str:
    try:
        return commit_id(value, where)
    except UnsafeNameError as exc:
        raise LockError(exc.message) from None


def _variants(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise LockError(f"{where}: 'variants' must be an object of variant: hash")
    variants = {}
    for name, lock in value.items():
        try:
            variant = file_name(name, f"{where}: a variant")
        except UnsafeNameError as exc:
            raise LockError(exc.message) from None
        hash_value = lock.get("hash") if isinstance(lock, dict) else None
        hash_type = lock.get("hash_type", HASH_TYPE) if isinstance(lock, dict) else None
        if hash_type != HASH_TYPE:
            raise LockError(f"{where}: {variant} has the hash type {shown(repr(hash_type), 40)}; "
                            f"only {HASH_TYPE} is known")
        if not isinstance(hash_value, str) or not _HASH.fullmatch(hash_value):
            raise LockError(f"{where}: {variant} has the hash {shown(repr(hash_value), 80)}, not "
                            "sha256-<64 hex digits>")
        variants[variant] = hash_value
    return variants


def _refuse_unlocked(project: Path, lock: KernelsLock) -> None:
    """Every kernel ``[tool.kernels.dependencies]`` names must be locked."""
    try:
        config = parse_toml(read_regular(project, "the project file", LockError).decode("utf-8"))
    except FileNotFoundError:
        raise LockError(f"{project} does not exist: give the kernels.lock file itself, or a "
                        "project folder holding pyproject.toml and kernels.lock") from None
    except OSError as exc:
        raise LockError(f"cannot read {project}: {shown(exc.strerror or str(exc), 100)}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LockError(f"cannot read {project}: {shown(str(exc), 100)}") from None
    except NestingError:  # nested past MAX_DEPTH, refused before the parser recursed
        raise LockError(f"cannot read {project}: it is nested too deeply to be a project file") from None
    tool = config.get("tool", {})
    kernels = tool.get("kernels", {}) if isinstance(tool, dict) else None
    dependencies = kernels.get("dependencies", {}) if isinstance(kernels, dict) else None
    if not isinstance(kernels, dict):
        raise LockError(f"{project}: [tool] and [tool.kernels] must be tables")
    if not isinstance(dependencies, dict):
        raise LockError(f"{project}: [tool.kernels.dependencies] must be a table of "
                        '"org/name" = version')
    locked = {kernel.repo_id for kernel in lock.kernels}
    unlocked = sorted(name for name in dependencies if name not in locked)
    if unlocked:
        raise LockError(f"{project} depends on {', '.join(unlocked)}, which {lock.path.name} does "
                        f"not lock: run kernels lock {project.parent} again")
