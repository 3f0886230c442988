"""Variant wheels in a static site (PEP 825 draft): every release with variant wheels
gets ``files/<name>-<version>-variants.json``, merged from its wheels' ``variant.json``,
and the root index lists the variant wheels and that file. Target indexes do not: they
serve plain pip, which ignores variant wheels, and already list the plain build.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from ..errors import IndexConflictError, UsageError
from ..index import simple
from ..index.wheelfacts import WheelFacts
from ..wheel.variant_label import VARIANT_JSON, merge_variant_files, split_variant_label, variant_json_text
from .atomic import Staging

_MAX_VARIANT_JSON = 1 << 20  # a variant.json is a few kB; a larger one is not read


def variants_file_name(filename: str, version: str) -> str:
    """``img2gray-1.1.2-cp39-...-t27cu128.whl`` -> ``img2gray-1.1.2-variants.json``
    (the distribution as the wheel spells it, PEP 825)."""
    return f"{filename.split('-', 1)[0]}-{version}-variants.json"


def write_variants_files(files_dir: Path, facts: Mapping[str, WheelFacts],
                         staging: Staging) -> dict[str, list[simple.WheelEntry]]:
    """Write each release's ``-variants.json`` (when its bytes change) and return, per
    project, the root-page entries of its variant wheels and variants files."""
    releases: dict[tuple[str, str], list[WheelFacts]] = {}
    for fact in facts.values():
        if split_variant_label(fact.filename)[1] is not None:
            releases.setdefault((fact.project, fact.version), []).append(fact)
    entries: dict[str, list[simple.WheelEntry]] = {}
    for (project, version), wheels in sorted(releases.items()):
        wheels.sort(key=lambda f: f.filename)
        name = variants_file_name(wheels[0].filename, version)
        content = _variants_json(files_dir, wheels, name)
        path = files_dir / name
        if not (path.is_file() and path.read_bytes() == content):
            staging.write(path, content)
        found = entries.setdefault(project, [])
        found += [_entry(f.project, f.filename, f.sha256, f.size, f.requires_python, f.metadata_sha256)
                  for f in wheels]
        found.append(_entry(project, name, hashlib.sha256(content).hexdigest(), len(content), None, None))
    return entries


def _variants_json(files_dir: Path, wheels: list[WheelFacts], name: str) -> bytes:
    texts = [(fact.filename, _read_variant_json(files_dir / fact.filename)) for fact in wheels]
    try:
        return variant_json_text(merge_variant_files(texts)).encode()
    except UsageError as exc:
        raise IndexConflictError(f"{name} cannot be written: {exc.message}") from None


def _read_variant_json(wheel: Path) -> str:
    """The checked wheel's ``<dist-info>/variant.json`` (check made sure it is there)."""
    with zipfile.ZipFile(wheel) as zf:
        info = next(i for i in zf.infolist()
                    if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/" + VARIANT_JSON))
        if info.file_size > _MAX_VARIANT_JSON:
            raise IndexConflictError(f"{wheel.name}: its {VARIANT_JSON} is larger than 1 MiB")
        return zf.read(info).decode("utf-8", "replace")


def _entry(project: str, filename: str, sha256: str, size: int, requires_python: str | None,
           metadata_sha256: str | None) -> simple.WheelEntry:
    return simple.WheelEntry(project=project, filename=filename,
                             url="../../files/" + quote(filename, safe=""), sha256=sha256,
                             requires_python=requires_python, core_metadata_sha256=metadata_sha256,
                             size=size)
