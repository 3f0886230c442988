"""The site's memory between runs: ``SITE/.kernel-wheels/state.json``.

A cache, never the truth: the truth is the set of wheels in ``SITE/files/``. Facts of a
wheel are reused while its size and modification time are unchanged (not its inode: a
site copied or restored with its times, ``cp -a``, ``rsync -a``, keeps its cache); input
files outside the site are remembered the same way so that indexing a folder again
does not re-hash what it has already seen. Losing the file costs one full re-read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..confine import read_regular
from ..index.wheelfacts import WheelFacts
from ..reading import parse_json

STATE_FORMAT = 3  # 2: stat keys without the inode; 3: wheels' GPU code

StatKey = tuple[int, int]  # size, mtime_ns


def stat_key(stat: os.stat_result) -> StatKey:
    return stat.st_size, stat.st_mtime_ns


@dataclass
class ProjectRecord:
    #: sha256 over the project's (file name, sha256) pairs: unchanged -> pages unchanged.
    fingerprint: str
    #: The indexes (``""`` for the root one, else a target key) that list the project.
    indexes: list[str]


@dataclass
class SiteState:
    """Mutable on purpose: one run reads it, updates it and writes it back."""

    renderer: str = ""
    #: The targets whose pages a finished run wrote.
    targets: set[str] = field(default_factory=set)
    #: Targets of wheels placed by a run that had not written their pages yet when it
    #: saved the state mid-way; the next run writes them (they are new targets to it).
    pending_targets: set[str] = field(default_factory=set)
    #: Projects whose files such a run changed: their pages are to be rendered.
    pending_projects: set[str] = field(default_factory=set)
    wheels: dict[str, tuple[StatKey, WheelFacts]] = field(default_factory=dict)
    inputs: dict[str, tuple[StatKey, str]] = field(default_factory=dict)
    projects: dict[str, ProjectRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SiteState:
        try:
            # Not a regular file (a FIFO would hang the read): rebuilt like a damaged one.
            raw = parse_json(read_regular(path, "the site's state", ValueError, 1 << 30))
            if raw.get("format") != STATE_FORMAT:
                return cls()
            return cls(
                renderer=raw["renderer"],
                targets=set(raw["targets"]),
                pending_targets=set(raw.get("pending_targets", [])),
                pending_projects=set(raw.get("pending_projects", [])),
                wheels={name: (tuple(row[0]), WheelFacts.from_json(name, row[1]))
                        for name, row in raw["wheels"].items()},
                inputs={path: (tuple(row[0]), row[1])
                        for path, row in raw["inputs"].items()},
                projects={name: ProjectRecord(row[0], list(row[1]))
                          for name, row in raw["projects"].items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError, AssertionError, RecursionError):
            # Missing or damaged (not an object, wrong types, nested past the parser): start
            # afresh, the site's files are the truth.
            return cls()

    def to_json(self) -> str:
        return json.dumps({
            "format": STATE_FORMAT,
            "renderer": self.renderer,
            "targets": sorted(self.targets),
            "pending_targets": sorted(self.pending_targets),
            "pending_projects": sorted(self.pending_projects),
            "wheels": {name: [list(key), facts.to_json()]
                       for name, (key, facts) in sorted(self.wheels.items())},
            "inputs": {path: [list(key), sha] for path, (key, sha) in sorted(self.inputs.items())},
            "projects": {name: [rec.fingerprint, sorted(rec.indexes)]
                         for name, rec in sorted(self.projects.items())},
        }, separators=(",", ":")) + "\n"
