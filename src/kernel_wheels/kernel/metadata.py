"""A variant's ``metadata.json`` (written by kernel-builder), read as kernels-data reads
it, and the pip requirements its ``python-depends`` and ``kernel-depends`` stand for.

kernels-data's rules (``data/kernels_data.json``) decide, because the ``kernels`` library
loads a build only if kernels-data reads its metadata.json. Two kinds of file are on the
Hub, told apart by ``name``:

- kernels-data's own (kernel-builder since April 2026; what kernels 0.14 and later load)
  has ``name``. What kernels-data refuses is refused, in one line naming the file and the
  key: a missing ``name``, ``id``, ``version``, ``license``, ``python-depends`` or
  ``backend``; a name outside ``^[a-z][-a-z0-9]*[a-z0-9]$``; an unknown backend or digest
  algorithm; an ``upstream``/``source`` that is not a git URL; a ``kernel-depends`` entry
  of another shape; a ``provenance`` kernels cannot read (kernel/build_provenance.py).
- the earlier one (kernel-builder before April 2026: ``python-depends``, perhaps
  ``version``, ``license``, ``upstream``, ``backend``) has no ``name``. It is converted
  with a warning: refusing it would refuse every Hub release built before then, which
  earlier kernels load; kernels 0.14 and later do not.

The values both kinds hold are held to the same rules. The legacy provenance key ``sha``
is read as ``commit``, as kernels-data reads it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from .. import data
from ..confine import read_regular, shown
from ..errors import MetadataError
from ..reading import NestingError, parse_json
from .build_provenance import BuildProvenance, read_build_provenance
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

    def pip_cannot_pin(self) -> str | None:
        """For a revision pin, what its Requires-Dist cannot say, in one line."""
        if self.revision is None:
            return None
        return (f"kernel-depends pins {self.repo_id} to revision '{shown(self.revision, 80)}', which "
                f"a Requires-Dist cannot express: the wheels require '{self.project}' of any "
                "version and record the pin in their kernel_wheels.json (local-kernels checks it)")

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
    #: git URLs, as kernels shows them (the scp form ``git@host:org/repo`` as ``ssh://``).
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    backend: str | None = None
    archs: tuple[str, ...] = ()
    #: ``digest.algorithm`` (``sha256`` or ``sha512``); None without a digest.
    digest_algorithm: str | None = None
    provenance: BuildProvenance | None = None
    #: What kernels-data would refuse that is converted anyway, one line each (the
    #: format before kernels 0.14), for the run to say.
    warnings: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)


def read_kernel_metadata(path: Path | None) -> KernelMetadata:
    if path is None:
        return KernelMetadata()
    where = f"{path.parent.name}/metadata.json"
    try:
        # A regular file of bounded size, like every file of outside data.
        raw = parse_json(read_regular(path, f"{path.parent.name}'s metadata file", MetadataError)
                         .decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{where} is not valid JSON: {exc}") from None
    except NestingError:  # nested past MAX_DEPTH, refused before the parser recursed
        raise MetadataError(f"{where} is nested too deeply") from None
    if not isinstance(raw, dict):
        raise MetadataError(f"{where} is not a JSON object")
    return parse_kernel_metadata(raw, where)


def parse_kernel_metadata(raw: dict[str, Any], where: str) -> KernelMetadata:
    """metadata.json's object, read by kernels-data's rules; ``where`` names the file in
    messages (``torch-cpu/metadata.json``)."""
    rules = data.load("kernels_data")

    def typed(key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise MetadataError(f"{where}: '{key}' must be {what}, not {type(value).__name__}")
        return value

    name = typed("name", str, "a string")
    if name is not None and not re.fullmatch(rules["name_pattern"], name):
        raise MetadataError(f"{where}: 'name' {shown(repr(name))} is not a valid kernel name "
                            "(kernels: lowercase letters, digits and '-', starting with a letter, "
                            "at least 2 characters)")
    version = typed("version", int, "an integer (the major version)")
    if version is not None and not 0 <= version < 1 << 64:
        raise MetadataError(f"{where}: 'version' {version} is not a major version (0 or more)")
    depends = typed("python-depends", list, "a list of names")
    if not all(isinstance(d, str) for d in depends or []):
        raise MetadataError(f"{where}: 'python-depends' must be a list of names")
    if "kernel-depends" in raw and raw["kernel-depends"] is None:  # absent is [], null is not
        raise MetadataError(f"{where}: 'kernel-depends' must be a list of kernels, not null")
    kernel_depends = _kernel_depends(typed("kernel-depends", list, "a list of kernels") or [], where)
    backend, archs = _backend(typed("backend", dict, "an object"), where, rules["backends"])
    digest_algorithm = _digest(typed("digest", dict, "an object"), where, rules["digest_algorithms"])
    repo_id = typed("repo-id", str, "a string")
    if repo_id is not None and not is_repo_id(repo_id):
        raise MetadataError(f"{where}: 'repo-id' {shown(repr(repo_id))} is not a Hub repository "
                            "id (org/name)")
    kernel_id, licence = typed("id", str, "a string"), typed("license", str, "a string")
    urls = {key: _git_url(typed(key, str, "a string"), key, where, rules["git_url_schemes"])
            for key in ("upstream", "source")}
    provenance = read_build_provenance(raw.get("provenance"), where)
    warnings: tuple[str, ...] = ()
    if name is not None:
        missing = [key for key in rules["required"] if raw.get(key) is None]
        if missing:
            raise MetadataError(f"{where}: '{missing[0]}' is missing ({rules['since']} and later "
                                "refuse a metadata.json without it)")
    else:
        warnings = (f"{where} is in the format from before {rules['since']} (no 'name'): "
                    f"converted, but {rules['since']} and later do not load this build",)
    return KernelMetadata(
        name=name,
        id=kernel_id or None,
        repo_id=repo_id,
        version=version,
        license=licence or None,
        upstream=urls["upstream"],
        source=urls["source"],
        python_depends=tuple(depends or ()),
        kernel_depends=kernel_depends,
        backend=backend,
        archs=archs,
        digest_algorithm=digest_algorithm,
        provenance=provenance,
        warnings=warnings,
        raw=raw,
    )


def _backend(backend: dict[str, Any] | None, where: str,
             known: list[str]) -> tuple[str | None, tuple[str, ...]]:
    """``backend``: its ``type`` (one kernels knows) and ``archs`` (a list of strings)."""
    if backend is None:
        return None, ()
    kind = backend.get("type")
    if not isinstance(kind, str):
        raise MetadataError(f"{where}: 'backend.type' must be a string")
    if kind not in known:
        raise MetadataError(f"{where}: 'backend.type' {shown(repr(kind))} is not a backend kernels "
                            f"knows ({', '.join(known)})")
    archs = backend.get("archs") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise MetadataError(f"{where}: 'backend.archs' must be a list of strings")
    return kind, tuple(archs)


def _digest(digest: dict[str, Any] | None, where: str, known: list[str]) -> str | None:
    """``digest``: an algorithm kernels-data hashes with and ``{file: base64 hash}``."""
    if digest is None:
        return None
    algorithm = digest.get("algorithm")
    if not isinstance(algorithm, str):
        raise MetadataError(f"{where}: 'digest.algorithm' must be a string")
    if algorithm not in known:
        raise MetadataError(f"{where}: 'digest.algorithm' {shown(repr(algorithm))} is not one "
                            f"kernels reads ({', '.join(known)})")
    files = digest.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise MetadataError(f"{where}: 'digest.files' must be an object of file: {algorithm} strings")
    return algorithm


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def _git_url(value: str | None, key: str, where: str, schemes: list[str]) -> str | None:
    """A git URL as kernels-data's ``GitUrl`` takes it: a URL of a git scheme, or the scp
    form ``user@host:org/repo.git`` (shown as ``ssh://user@host/org/repo.git``). Spaces and
    control characters are refused: the URL goes into a METADATA header line."""
    if value is None:
        return None
    refused = MetadataError(f"{where}: '{key}' {shown(repr(value))} is not a git URL ({', '.join(schemes)} "
                            "or user@host:path)")
    if not value or any(ch.isspace() or not ch.isprintable() for ch in value):
        raise refused
    if (scheme := _SCHEME.match(value)) is not None:
        if scheme[1].lower() not in schemes:
            raise refused
        try:
            host = urlsplit(value).hostname
        except ValueError:
            raise refused from None
        if not host and scheme[1].lower() in ("http", "https"):
            raise refused
        return value
    host, _, path = value.partition(":")
    if not host or not path or path.startswith("/") or "/" in host:
        raise refused
    return f"ssh://{host}/{path}"


def _kernel_depends(entries: list[Any], where: str) -> tuple[KernelDependency, ...]:
    """``[{"repo-id": "org/name", "version": 1}, {"repo-id": ..., "revision": ...}]``, no
    other key (kernels-data refuses unknown ones)."""
    found = []
    keys = set(data.load("kernels_data")["kernel_depends_keys"])
    for entry in entries:
        repo_id = entry.get("repo-id") if isinstance(entry, dict) else None
        version = entry.get("version") if isinstance(entry, dict) else None
        revision = entry.get("revision") if isinstance(entry, dict) else None
        if not is_repo_id(repo_id) or set(entry) - keys or not (
                (isinstance(version, int) and not isinstance(version, bool) and version >= 0
                 and revision is None)
                or (version is None and isinstance(revision, str) and revision
                    and revision.isprintable() and not any(ch.isspace() for ch in revision))):
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
