"""A variant's ``metadata.json`` (written by kernel-builder), read into a dataclass,
and the pip requirements its ``python-depends`` stand for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import data
from .errors import MetadataError


@dataclass(frozen=True)
class KernelMetadata:
    name: str | None = None
    id: str | None = None
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()
    backend: str | None = None
    archs: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)


def read_kernel_metadata(path: Path | None) -> KernelMetadata:
    if path is None:
        return KernelMetadata()
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path.parent.name}/metadata.json is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise MetadataError(f"{path.parent.name}/metadata.json is not a JSON object")

    def text(key: str) -> str | None:
        value = raw.get(key)
        return value if isinstance(value, str) and value else None

    depends = raw.get("python-depends", [])
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise MetadataError(f"{path.parent.name}/metadata.json: python-depends must be a list")
    backend: dict[str, Any] = raw["backend"] if isinstance(raw.get("backend"), dict) else {}
    version = raw.get("version")
    return KernelMetadata(
        name=text("name"),
        id=text("id"),
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        license=text("license"),
        upstream=text("upstream"),
        source=text("source"),
        python_depends=tuple(depends),
        backend=backend.get("type"),
        archs=tuple(str(a) for a in backend.get("archs") or ()),
        raw=raw,
    )


def python_requirements(depends: tuple[str, ...], backend: str) -> list[str]:
    """Map kernel-builder's curated names to pip requirements; an unknown name is an error."""
    table = data.load("python_depends")
    requirements: list[str] = []
    for name in depends:
        found = table["general"].get(name) or table["backends"].get(backend, {}).get(name)
        if found is None:
            known = sorted(set(table["general"]) | set(table["backends"].get(backend, {})))
            raise MetadataError(
                f"unknown python-depends '{name}' for backend {backend} "
                f"(known: {', '.join(known)}); add it to kernel_wheels/data/python_depends.json")
        requirements.extend(r for r in found if r not in requirements)
    return requirements
