"""A variant's ``metadata.json`` (written by kernel-builder), read into a dataclass,
and the pip requirements its ``python-depends`` and ``kernel-depends`` stand for."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from .. import data
from ..confine import read_regular, shown
from ..errors import MetadataError
from .repo_id import is_repo_id


@dataclass(frozen=True)
class KernelDependency:
    """Another kernel a variant loads (the ``kernels`` library's ``kernel-depends``):
    a Hub repository and a major version (or a revision)."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    @property
    def project(self) -> str:
        """Its wheels' distribution name, by the same rule as every kernel's: the
        repository's name, PEP 503-normalised."""
        return canonicalize_name(self.repo_id.split("/", 1)[1])

    def requirement(self) -> str:
        """``activation>=1,<2`` for major version 1; the name alone for a revision."""
        if self.version is None:
            return self.project
        return f"{self.project}>={self.version},<{self.version + 1}"

    def as_json(self) -> dict[str, object]:
        """The entry as metadata.json's ``kernel-depends`` (and build.toml) write it."""
        pinned: dict[str, object] = {"repo-id": self.repo_id}
        if self.version is not None:
            pinned["version"] = self.version
        else:
            pinned["revision"] = self.revision
        return pinned


@dataclass(frozen=True)
class KernelMetadata:
    name: str | None = None
    id: str | None = None
    #: The Hub repository the kernel is published as (build.toml's ``[general.hub]
    #: repo-id``, which ``kernel-wheels build`` records): what ``get_kernel`` is asked for.
    repo_id: str | None = None
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    backend: str | None = None
    archs: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)


def read_kernel_metadata(path: Path | None) -> KernelMetadata:
    if path is None:
        return KernelMetadata()
    try:
        # A regular file of bounded size, like every file of outside data.
        raw = json.loads(read_regular(path, f"{path.parent.name}'s metadata file", MetadataError)
                         .decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path.parent.name}/metadata.json is not valid JSON: {exc}") from None
    except RecursionError:
        raise MetadataError(f"{path.parent.name}/metadata.json is nested too deeply") from None
    if not isinstance(raw, dict):
        raise MetadataError(f"{path.parent.name}/metadata.json is not a JSON object")

    where = f"{path.parent.name}/metadata.json"

    def typed(key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise MetadataError(f"{where}: '{key}' must be {what}, not {type(value).__name__}")
        return value

    name = typed("name", str, "a string")
    if name is not None:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
            raise MetadataError(f"{where}: 'name' {shown(repr(name))} is not a valid kernel name")
        module_name(name, where)
    depends = typed("python-depends", list, "a list of names") or []
    if not all(isinstance(d, str) for d in depends):
        raise MetadataError(f"{where}: 'python-depends' must be a list of names")
    kernel_depends = _kernel_depends(typed("kernel-depends", list, "a list of kernels") or [], where)
    backend: dict[str, Any] = typed("backend", dict, "an object") or {}
    if not isinstance(backend.get("type", ""), str):
        raise MetadataError(f"{where}: 'backend.type' must be a string")
    archs = backend.get("archs") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise MetadataError(f"{where}: 'backend.archs' must be a list of strings")
    digest: dict[str, Any] = typed("digest", dict, "an object") or {}
    if not isinstance(digest.get("algorithm", ""), str):
        raise MetadataError(f"{where}: 'digest.algorithm' must be a string")
    files = digest.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise MetadataError(f"{where}: 'digest.files' must be an object of file: sha256 strings")
    version = typed("version", int, "an integer (the major version)")
    repo_id = typed("repo-id", str, "a string")
    if repo_id is not None and not is_repo_id(repo_id):
        raise MetadataError(f"{where}: 'repo-id' {shown(repr(repo_id))} is not a Hub repository "
                            "id (org/name)")
    if version is not None and version < 0:
        raise MetadataError(f"{where}: 'version' {version} is not a major version (0 or more)")
    return KernelMetadata(
        name=name or None,
        id=typed("id", str, "a string") or None,
        repo_id=repo_id or None,
        version=version,
        license=typed("license", str, "a string") or None,
        upstream=typed("upstream", str, "a string") or None,
        source=typed("source", str, "a string") or None,
        python_depends=tuple(depends),
        kernel_depends=kernel_depends,
        backend=backend.get("type") or None,
        archs=tuple(archs),
        raw=raw,
    )


def _kernel_depends(entries: list[Any], where: str) -> tuple[KernelDependency, ...]:
    """``[{"repo-id": "org/name", "version": 1}, {"repo-id": ..., "revision": ...}]``."""
    found = []
    for entry in entries:
        repo_id = entry.get("repo-id") if isinstance(entry, dict) else None
        version = entry.get("version") if isinstance(entry, dict) else None
        revision = entry.get("revision") if isinstance(entry, dict) else None
        if not is_repo_id(repo_id) or not (
                (isinstance(version, int) and not isinstance(version, bool) and version >= 0
                 and revision is None)
                or (version is None and isinstance(revision, str) and revision)):
            raise MetadataError(f"{where}: 'kernel-depends' entry {shown(json.dumps(entry), 100)} is not "
                                '{"repo-id": "org/name", "version": N} or {"repo-id": ..., "revision": ...}')
        found.append(KernelDependency(repo_id, version, revision))
    return tuple(found)


def kernel_requirements(depends: tuple[KernelDependency, ...]) -> list[str]:
    """Requires-Dist lines for the kernels a variant depends on."""
    return [dependency.requirement() for dependency in depends]


def module_name(kernel_name: str, where: str) -> str:
    """The Python package a kernel is imported as (``flash-attn`` -> ``flash_attn``); a
    name that gives no importable package (``a..b``, ``my.kernel``) is refused."""
    module = kernel_name.replace("-", "_")
    if not module.isidentifier() or not module.isascii():
        raise MetadataError(f"{where}: the kernel name {shown(repr(kernel_name))} gives the package "
                            f"{shown(repr(module))}, which Python cannot import (letters, digits "
                            "and '_' or '-' only)")
    return module


def python_requirements(depends: tuple[str, ...], backend: str) -> list[str]:
    """Map kernel-builder's curated names to pip requirements; an unknown name is an error."""
    table = data.load("python_depends")
    requirements: list[str] = []
    for name in depends:
        found = table["general"].get(name) or table["backends"].get(backend, {}).get(name)
        if found is None:
            known = sorted(set(table["general"]) | set(table["backends"].get(backend, {})))
            raise MetadataError(
                f"unknown python-depends '{shown(name)}' for backend {shown(backend)} "
                f"(known: {', '.join(known)}); add it to kernel_wheels/data/python_depends.json")
        requirements.extend(r for r in found if r not in requirements)
    return requirements
