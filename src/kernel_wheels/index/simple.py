"""Simple Repository API pages as pure functions of a list of wheel entries.

PEP 503 HTML (with PEP 592 yanking, PEP 629 repository version, PEP 658/714 metadata
attributes) and PEP 691 JSON (with PEP 700 sizes and versions when every size is known).
Nothing here touches the file system or the network: the static site and ``serve``
render the same pages from the same entries.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from html import escape

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..kernel.gpu_archs import GpuCode
from ..wheel.variant_label import split_variant_label

HTML_TYPE = "text/html"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
#: Changes whenever the rendered bytes change, so that the static site re-renders.
FORMAT_VERSION = "2"
#: A file's key in a JSON page for the CUDA device code its binaries hold, as ``check``
#: proved it (``{"cubins": ["sm_80"], "ptx": ["compute_90"]}``); install chooses by it.
GPU_CODE_KEY = "kernel-wheels-gpu-code"


@dataclass(frozen=True)
class WheelEntry:
    """One file as an index lists it."""

    project: str
    filename: str
    #: Absolute, or relative to the project page (``../../files/x.whl``), no fragment.
    url: str
    sha256: str | None
    requires_python: str | None
    #: sha256 of the PEP 658 ``<url>.metadata`` file; None when there is no such file.
    core_metadata_sha256: str | None
    #: PEP 592: None when not yanked, else the reason ("" for none given).
    yanked: str | None = None
    size: int | None = None
    #: True when a metadata file exists but its hash is not known (PEP 714 allows this).
    core_metadata_unhashed: bool = False
    #: The file's provenance summary, shown as ``_provenance`` in the JSON form (a
    #: private key, as PEP 691 reserves them; docs/provenance.md).
    provenance: Mapping[str, object] | None = None
    #: The CUDA device code of a CUDA build's binaries (None: not a CUDA build, or unknown).
    gpu_code: GpuCode | None = None

    @property
    def has_core_metadata(self) -> bool:
        return self.core_metadata_sha256 is not None or self.core_metadata_unhashed


@lru_cache(maxsize=1 << 16)
def version_of(filename: str) -> Version | None:
    """A wheel's version from its file name (a variant wheel's label set aside)."""
    try:
        return parse_wheel_filename(split_variant_label(filename)[0])[1]
    except InvalidWheelFilename:
        return None


def _sorted(entries: Iterable[WheelEntry]) -> list[WheelEntry]:
    def key(entry: WheelEntry) -> tuple[bool, Version, str]:
        version = version_of(entry.filename)
        return (version is not None, version or Version("0"), entry.filename)

    return sorted(entries, key=key)


def _html_page(title: str, body: list[str]) -> str:
    lines = [
        "<!DOCTYPE html>",
        "<html>",
        "  <head>",
        '    <meta charset="utf-8">',
        '    <meta name="pypi:repository-version" content="1.1">',
        f"    <title>{escape(title)}</title>",
        "  </head>",
        "  <body>",
        f"    <h1>{escape(title)}</h1>",
        *body,
        "  </body>",
        "</html>",
    ]
    return "\n".join(lines) + "\n"


def render_project_html(project: str, entries: Iterable[WheelEntry]) -> str:
    name = canonicalize_name(project)
    links = []
    for entry in _sorted(entries):
        href = entry.url + (f"#sha256={entry.sha256}" if entry.sha256 else "")
        attributes = [f'href="{escape(href)}"']
        if entry.requires_python:
            attributes.append(f'data-requires-python="{escape(entry.requires_python)}"')
        if entry.has_core_metadata:
            value = f"sha256={entry.core_metadata_sha256}" if entry.core_metadata_sha256 \
                else "true"
            # PEP 714 renamed the attribute; older pip versions read only the first.
            attributes.append(f'data-dist-info-metadata="{value}"')
            attributes.append(f'data-core-metadata="{value}"')
        if entry.yanked is not None:
            attributes.append(f'data-yanked="{escape(entry.yanked)}"')
        links.append(f"    <a {' '.join(attributes)}>{escape(entry.filename)}</a><br>")
    return _html_page(f"Links for {name}", links)


def render_project_json(project: str, entries: Iterable[WheelEntry]) -> str:
    ordered = _sorted(entries)
    sized = all(e.size is not None for e in ordered)
    files = []
    for entry in ordered:
        item: dict[str, object] = {
            "filename": entry.filename,
            "url": entry.url,
            "hashes": {"sha256": entry.sha256} if entry.sha256 else {},
        }
        if entry.requires_python:
            item["requires-python"] = entry.requires_python
        if entry.has_core_metadata:
            meta: object = {"sha256": entry.core_metadata_sha256} \
                if entry.core_metadata_sha256 else True
            item["core-metadata"] = meta
            item["dist-info-metadata"] = meta
        item["yanked"] = entry.yanked or (entry.yanked is not None)
        if sized:
            item["size"] = entry.size
        if entry.provenance is not None:
            item["_provenance"] = dict(entry.provenance)
        if entry.gpu_code is not None:
            item[GPU_CODE_KEY] = entry.gpu_code.to_dict()
        files.append(item)
    page: dict[str, object] = {
        "meta": {"api-version": "1.1" if sized else "1.0"},
        "name": canonicalize_name(project),
        "files": files,
    }
    if sized:
        versions = {str(v) for e in ordered if (v := version_of(e.filename)) is not None}
        page["versions"] = sorted(versions, key=Version)
    return json.dumps(page, separators=(",", ":")) + "\n"


def render_root_html(projects: Iterable[str]) -> str:
    names = sorted({canonicalize_name(p) for p in projects})
    return _html_page("Simple index",
                      [f'    <a href="{escape(n)}/">{escape(n)}</a><br>' for n in names])


def render_root_json(projects: Iterable[str]) -> str:
    names = sorted({canonicalize_name(p) for p in projects})
    page = {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in names]}
    return json.dumps(page, separators=(",", ":")) + "\n"


def group_by_project(entries: Iterable[WheelEntry]) -> dict[str, list[WheelEntry]]:
    projects: dict[str, list[WheelEntry]] = {}
    for entry in entries:
        projects.setdefault(canonicalize_name(entry.project), []).append(entry)
    return projects


def render_index(entries: Iterable[WheelEntry]) -> dict[str, tuple[str, str]]:
    """Every page of one index: ``{"": (root html, root json), "img2gray/": (html,
    json), ...}``, keyed by the page's path relative to the index root."""
    projects: Mapping[str, list[WheelEntry]] = group_by_project(entries)
    pages = {"": (render_root_html(projects), render_root_json(projects))}
    for name, files in projects.items():
        pages[f"{name}/"] = (render_project_html(name, files), render_project_json(name, files))
    return pages
