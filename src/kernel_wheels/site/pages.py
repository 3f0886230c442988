"""The pages of a static site: which project pages to render, and writing them.

Every index (``SITE/simple/`` and each ``SITE/<target>/simple/``) gets, per project, the
pages :mod:`.simple` renders from the wheels :mod:`.targets` selects for it. Only the
projects whose files changed (and every project of a new target) are rendered, and a
page is rewritten only when its bytes change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import replace
from html import escape
from pathlib import Path
from urllib.parse import quote

from .. import __version__
from ..confine import inside
from ..index import simple
from ..index.targets import KernelWheel, parse_kernel_wheel, parse_target_key, select_for_target
from ..index.wheelfacts import WheelFacts
from .atomic import Staging
from .state import ProjectRecord, SiteState

FILES = "files"
SIMPLE = "simple"
ROOT_INDEX = ""  # the key of SITE/simple/ among the indexes; targets use their key
#: Changes when the rendered bytes may change: the site then renders every page again.
RENDERER = f"{__version__}/{simple.FORMAT_VERSION}"


def index_path(site: Path, index: str) -> Path:
    return site / index / SIMPLE if index else site / SIMPLE


def _fingerprint(facts: Iterable[WheelFacts], yanked: Mapping[str, str]) -> str:
    """Changes when the project's files or its yanks change."""
    text = "\n".join(sorted(f"{f.filename} {f.sha256}" for f in facts))
    text += "".join(f"\nyanked {version} {reason}" for version, reason in sorted(yanked.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _with_yanks(entries: list[simple.WheelEntry], yanked: Mapping[str, str]) -> list[simple.WheelEntry]:
    """Entries of a yanked release carry its reason (PEP 592)."""
    if not yanked:
        return entries
    marked = []
    for entry in entries:
        version = simple.version_of(entry.filename)
        reason = yanked.get(version.public) if version is not None else None
        marked.append(replace(entry, yanked=reason) if reason is not None else entry)
    return marked


def _entries(wheels: Iterable[KernelWheel], facts: dict[str, WheelFacts],
             depth: int) -> list[simple.WheelEntry]:
    prefix = "../" * depth + FILES + "/"
    entries = []
    for wheel in wheels:
        fact = facts[wheel.filename]
        entries.append(simple.WheelEntry(
            project=fact.project, filename=wheel.filename,
            url=prefix + quote(wheel.filename, safe=""), sha256=fact.sha256,
            requires_python=fact.requires_python, core_metadata_sha256=fact.metadata_sha256,
            size=fact.size, provenance=fact.provenance,
            gpu_code=fact.gpu_code))
    return entries


class PageWriter:
    """Writes a page's two forms when their bytes differ from what is there, each
    path proven inside the site first."""

    def __init__(self, staging: Staging, site: Path) -> None:
        self.staging = staging
        self.site = site
        self.written = 0
        self.unchanged = 0

    def path(self, relative: str) -> Path:
        return inside(self.site, relative, "a page of the site")

    def page(self, folder: Path, html: str, json_text: str, known_new: bool = False) -> None:
        relative = folder.relative_to(self.site).as_posix()
        if relative != ".":
            self.path(f"{relative}/index.html").parent.mkdir(parents=True, exist_ok=True)
        # JSON first: a reader of the HTML form (pip) then never sees an older JSON form
        # than HTML form for long; each file is replaced atomically anyway.
        for name, text in (("index.json", json_text), ("index.html", html)):
            path = self.path(name if relative == "." else f"{relative}/{name}")
            content = text.encode()
            if not known_new:
                try:
                    if path.read_bytes() == content:
                        self.unchanged += 1
                        continue
                except FileNotFoundError:
                    pass
            self.staging.write(path, content)
            self.written += 1


def render_pages(site: Path, facts: dict[str, WheelFacts], all_targets: set[str],
                 state: SiteState, touched: set[str], writer: PageWriter,
                 root_extra: dict[str, list[simple.WheelEntry]] | None = None,
                 yanks: Mapping[tuple[str, str], str] | None = None) -> dict[str, set[str]]:
    """Render the project pages that may have changed: those of ``touched`` projects
    (a wheel inspected or removed in this run, or in a killed run that left them
    pending) whose files really differ, all pages of new targets, and any page missing
    on disk. Returns, per index, the projects it lists. ``root_extra``: more entries of a
    project's root page (variant wheels and their ``-variants.json``, :mod:`.sitevariants`);
    ``yanks``: (project, release) -> reason (:mod:`.yanks`)."""
    by_project: dict[str, list[WheelFacts]] = {}
    for fact in facts.values():
        by_project.setdefault(fact.project, []).append(fact)
    new_targets = all_targets - state.targets
    rerender_all = state.renderer != RENDERER
    indexes_in_order = [ROOT_INDEX, *sorted(all_targets)]
    existing = {index: _existing_projects(index_path(site, index)) for index in indexes_in_order}
    parsed_targets = {key: parse_target_key(key) for key in all_targets}
    listed: dict[str, set[str]] = {index: set() for index in indexes_in_order}
    for project, project_facts in sorted(by_project.items()):
        record = state.projects.get(project)
        yanked = {version: reason for (name, version), reason in (yanks or {}).items()
                  if name == project}
        fingerprint = _fingerprint(project_facts, yanked) \
            if rerender_all or record is None or project in touched else record.fingerprint
        dirty = rerender_all or record is None or record.fingerprint != fingerprint
        indexes: list[str] = []
        wheels: list[KernelWheel] | None = None
        for index in indexes_in_order:
            page_exists = project in existing[index]
            if not dirty and index not in new_targets and record is not None:
                if index in record.indexes and page_exists:
                    indexes.append(index)
                    continue
                if index not in record.indexes and not page_exists:
                    continue
            if wheels is None:
                wheels = [w for f in project_facts if (w := parse_kernel_wheel(f.filename))]
            chosen = wheels if index == ROOT_INDEX else \
                select_for_target(parsed_targets[index], wheels)
            extra = (root_extra or {}).get(project, []) if index == ROOT_INDEX else []
            if not chosen and not extra:
                continue
            entries = _with_yanks(_entries(chosen, facts, depth=2 if index == ROOT_INDEX else 3) + extra,
                                  yanked)
            writer.page(index_path(site, index) / project,
                        simple.render_project_html(project, entries),
                        simple.render_project_json(project, entries),
                        known_new=not page_exists)
            indexes.append(index)
        state.projects[project] = ProjectRecord(fingerprint, indexes)
        for index in indexes:
            listed[index].add(project)
    for gone in set(state.projects) - set(by_project):
        del state.projects[gone]
    return listed


def _existing_projects(folder: Path) -> set[str]:
    try:
        with os.scandir(folder) as entries:
            return {e.name for e in entries if e.is_dir()}
    except FileNotFoundError:
        return set()


def write_roots(site: Path, listed: dict[str, set[str]], writer: PageWriter) -> None:
    for index, projects in listed.items():
        writer.page(index_path(site, index), simple.render_root_html(projects),
                    simple.render_root_json(projects))


def remove_unlisted(site: Path, listed: dict[str, set[str]]) -> None:
    """Project pages an index no longer lists (their wheels were removed from files/)."""
    for index, projects in listed.items():
        root = index_path(site, index)
        for name in _existing_projects(root) - projects:
            page = inside(site, f"{root.relative_to(site).as_posix()}/{name}/index.html",
                          "a page of the site")
            if page.is_file():
                shutil.rmtree(page.parent, ignore_errors=True)


def landing_page_html(targets: list[str]) -> str:
    """The site's ``index.html``: the indexes it holds (also the mirror's)."""
    items = [f'    <li><a href="{SIMPLE}/">{SIMPLE}/</a>: every wheel (for '
             "<code>kernel-wheels install</code>)</li>"]
    items += [f'    <li><a href="{escape(t)}/{SIMPLE}/">{escape(t)}/{SIMPLE}/</a>: '
              f"<code>pip install NAME --index-url http://HOST/{escape(t)}/{SIMPLE}</code></li>"
              for t in targets]
    return "\n".join(["<!DOCTYPE html>", "<html>", "  <head>", '    <meta charset="utf-8">',
                      "    <title>Kernel wheels</title>", "  </head>", "  <body>",
                      "    <h1>Kernel wheels</h1>", "    <ul>", *items, "    </ul>",
                      "  </body>", "</html>"]) + "\n"


def write_landing_page(site: Path, targets: list[str], writer: PageWriter) -> None:
    html = landing_page_html(targets)
    path = writer.path("index.html")
    try:
        if path.read_text() == html:
            return
    except FileNotFoundError:
        pass
    writer.staging.write(path, html.encode())
