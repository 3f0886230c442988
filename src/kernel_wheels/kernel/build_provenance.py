"""metadata.json's ``provenance``: which kernel-builder built a variant, from which
kernel commit, and whether either git tree had uncommitted changes. Read exactly as
kernels-data reads it (``metadata.rs``, ``git.rs``), so that a build the ``kernels``
library refuses to load is refused here too:

- ``kernel-builder`` is required: its ``version``, and its ``commit`` and ``dirty``
  together or neither;
- ``kernel`` may be absent or null; when there, ``commit`` and ``dirty`` are both required;
- a commit is a full git object id (40 or 64 hexadecimal digits), kept lowercase;
- ``sha`` is read as ``commit``: kernel-builder's 0.17 development builds wrote it, and
  many Hub kernels still carry it (kernels-data's ``legacy-sha-provenance.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..confine import shown
from ..errors import MetadataError

_OID = re.compile(r"[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64}")


@dataclass(frozen=True)
class GitState:
    """A git working tree as kernel-builder saw it: its HEAD commit and whether tracked
    files had uncommitted changes."""

    commit: str
    dirty: bool


@dataclass(frozen=True)
class BuildProvenance:
    builder_version: str
    #: kernel-builder's own tree, when its build knew it.
    builder: GitState | None = None
    #: The kernel source's tree; None when the source was not a git repository.
    kernel: GitState | None = None

    @property
    def dirty(self) -> bool | None:
        """Either tree dirty (kernels' ``Provenance.is_dirty``); None when neither says."""
        flags = [state.dirty for state in (self.builder, self.kernel) if state is not None]
        return any(flags) if flags else None


def read_build_provenance(value: object, where: str) -> BuildProvenance | None:
    """``provenance`` of the metadata.json at ``where``; None when absent or null.
    Raises MetadataError naming the file and the key."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MetadataError(f"{where}: 'provenance' must be an object, not {_kind(value)}")
    builder = value.get("kernel-builder")
    if builder is None:
        raise MetadataError(f"{where}: 'provenance.kernel-builder' is missing (kernels requires it)")
    if not isinstance(builder, dict):
        raise MetadataError(f"{where}: 'provenance.kernel-builder' must be an object, not "
                            f"{_kind(builder)}")
    version = builder.get("version")
    if not isinstance(version, str):
        raise MetadataError(f"{where}: 'provenance.kernel-builder.version' must be a string, not "
                            f"{_kind(version)}")
    kernel = value.get("kernel")
    if kernel is not None and not isinstance(kernel, dict):
        raise MetadataError(f"{where}: 'provenance.kernel' must be an object, not {_kind(kernel)}")
    return BuildProvenance(
        builder_version=version,
        builder=_git_state(builder, "provenance.kernel-builder", where, required=False),
        kernel=_git_state(kernel, "provenance.kernel", where, required=True) if kernel is not None
        else None)


def _git_state(entry: dict[str, Any], key: str, where: str, *, required: bool) -> GitState | None:
    if "commit" in entry and "sha" in entry:
        raise MetadataError(f"{where}: '{key}' has both 'commit' and its legacy spelling 'sha'")
    commit_key = "commit" if "commit" in entry else "sha" if "sha" in entry else None
    if commit_key is None and "dirty" not in entry:
        if not required:
            return None
        raise MetadataError(f"{where}: '{key}.commit' is missing (kernels requires it)")
    if commit_key is None or "dirty" not in entry:
        has, lacks = (commit_key, "dirty") if commit_key else ("dirty", "commit")
        raise MetadataError(f"{where}: '{key}' has '{has}' without '{lacks}' (kernels requires "
                            "both together)")
    commit, dirty = entry[commit_key], entry["dirty"]
    if not isinstance(commit, str):
        raise MetadataError(f"{where}: '{key}.{commit_key}' must be a git commit id, not {_kind(commit)}")
    if not _OID.fullmatch(commit):
        raise MetadataError(f"{where}: '{key}.{commit_key}' {shown(repr(commit), 80)} is not a git "
                            "commit id (40 or 64 hexadecimal digits)")
    if not isinstance(dirty, bool):
        raise MetadataError(f"{where}: '{key}.dirty' must be true or false, not {_kind(dirty)}")
    return GitState(commit.lower(), dirty)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
