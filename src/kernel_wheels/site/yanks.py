"""Yanking a release from a static site (PEP 592), and undoing it.

A yank is kept in ``SITE/.kernel-wheels/yanks.json`` (``{project: {version: reason}}``)
and shown on every page that lists the release's files (``data-yanked`` in HTML,
``"yanked"`` in JSON, on the root index and every target index). Installers then skip
the release unless it is asked for exactly (``==``); its files stay where they are, so
a pinned install keeps working. ``kernel-wheels install`` honours it the same way.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..confine import read_regular
from ..errors import UsageError
from ..reading import parse_json
from .atomic import SiteLock

YANKS_FILE = "yanks.json"
_MAX_REASON = 500

#: Unicode categories a reason may not hold: control characters (C0, DEL, C1: a
#: terminal's escape sequences), format characters (bidirectional overrides, which
#: reorder what a terminal or browser shows) and line or paragraph separators. pip
#: prints a yank reason to every user who installs the release.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})

#: (project, public version) -> reason ("" for none given).
Yanks = Mapping[tuple[str, str], str]


@dataclass(frozen=True)
class YankChange:
    project: str
    version: str
    yanked: bool  # the state after the change
    reason: str
    changed: bool  # False: it already was so


def unsafe_reason(reason: str) -> bool:
    """Whether ``reason`` holds a character no terminal or page may be given."""
    return any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in reason)


def load_yanks(state_dir: Path) -> dict[tuple[str, str], str]:
    """The site's yanks; none when the file is missing. A damaged file is an error, not
    an empty list: silently un-yanking a release would undo a deliberate decision."""
    path = state_dir / YANKS_FILE
    try:
        # A regular file of bounded size: a FIFO in its place would hang the run.
        raw = parse_json(read_regular(path, "the yanks file", UsageError).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"{path} cannot be read ({exc.__class__.__name__}); restore it or "
                         "remove it to un-yank everything") from None
    if not isinstance(raw, dict) or not all(
            isinstance(v, dict) and all(isinstance(r, str) for r in v.values()) for v in raw.values()):
        raise UsageError(f"{path} is not {{project: {{version: reason}}}}; restore it or remove it")
    if any(unsafe_reason(r) for v in raw.values() for r in v.values()):
        raise UsageError(f"{path} has a yank reason with a control character in it; restore it "
                         "or remove it")
    return {(str(project), str(version)): reason
            for project, versions in raw.items() for version, reason in versions.items()}


def _save(state_dir: Path, yanks: Mapping[tuple[str, str], str]) -> None:
    nested: dict[str, dict[str, str]] = {}
    for (project, version), reason in sorted(yanks.items()):
        nested.setdefault(project, {})[version] = reason
    path = state_dir / YANKS_FILE
    temp = path.with_name(f".{YANKS_FILE}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(nested, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(temp, path)


def release_of(filename_version: str) -> str | None:
    """The public release of a wheel's version (``1.1.2+torch27cu128cxx11`` -> ``1.1.2``)."""
    try:
        return Version(filename_version).public
    except InvalidVersion:
        return None


def change_yank(state_dir: Path, releases: Callable[[str], set[str]], name: str, version: str,
                *, reason: str = "", undo: bool = False) -> YankChange:
    """Yank (or, with ``undo``, un-yank) ``name`` ``version`` in the site whose state
    folder is ``state_dir``. ``releases(project)`` gives the releases the site holds."""
    project = canonicalize_name(name)
    try:
        public = Version(version).public
    except InvalidVersion:
        raise UsageError(f"'{version}' is not a version (PEP 440)") from None
    if len(reason) > _MAX_REASON or unsafe_reason(reason):
        raise UsageError(f"--reason must be one line of at most {_MAX_REASON} characters, "
                         "without control characters (terminal escapes, bidirectional overrides)")
    with SiteLock(state_dir / "lock"):
        have = releases(project)
        if not have:
            raise UsageError(f"the site has no project {project}")
        if public not in have:
            raise UsageError(f"the site has no {project} {public} (it has "
                             f"{', '.join(sorted(have, key=Version))})")
        yanks = load_yanks(state_dir)
        key = (project, public)
        before = yanks.get(key)
        if undo:
            yanks.pop(key, None)
        else:
            yanks[key] = reason
        changed = yanks.get(key) != before
        if changed:
            _save(state_dir, yanks)
    return YankChange(project, public, not undo, reason, changed)
