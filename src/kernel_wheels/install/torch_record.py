""""torch unchanged", proven by what the installer wrote: the RECORD of every
distribution it installed, against torch's own RECORD.

The installer runs with torch pinned, but a pin holds only torch's *version*: any wheel
it installs (the kernel's dependencies come from the index too) may write files into
``torch/``, and pip checks no file ownership. An installer writes a distribution's files
and then its RECORD, which lists every file it wrote (wheels run no code on install), so
what a run wrote is the union of the RECORDs that are new or rewritten after it. torch
is unchanged when its own RECORD is the same file (not reinstalled, not removed) and no
other RECORD written by the run lists a file that torch's RECORD lists. This reads a few
RECORDs in this process instead of statting torch's 14,622 files twice in the target
Python (issue #42).

A run whose installer failed may have written files without the RECORD that lists them:
then torch's recorded files are statted once, after, for a status change since the
installer started (a file rewritten in place or replaced has a new ctime).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..reading import open_regular, read_regular
from .environment import Installed

#: A RECORD larger than this is no installer's (torch's is a few MB).
_MAX_RECORD = 256 << 20

StatKey = tuple[int, int, int]
#: File systems stamp times from a coarse clock (a tick, at most 10 ms, behind the time
#: read here): a change just after the installer started must not look older.
_CLOCK_SLACK_NS = 50_000_000


def _stat(path: Path) -> StatKey | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns, found.st_ino


def _records(site: Sequence[Path]) -> dict[Path, StatKey | None]:
    """Every ``*.dist-info/RECORD`` of the site folders, by its (size, mtime, inode)."""
    found: dict[Path, StatKey | None] = {}
    for folder in site:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".dist-info") and entry.is_dir(follow_symlinks=False):
                record = Path(entry.path) / "RECORD"
                found[record] = _stat(record)
    return found


def _recorded_paths(record: Path) -> Iterable[tuple[str, str]]:
    """(the path as RECORD writes it, the absolute normalized path) of each row."""
    base = record.parent.parent
    try:
        with io.TextIOWrapper(open_regular(record, "a RECORD", OSError, limit=None), newline="",
                              encoding="utf-8", errors="surrogateescape") as stream:
            for row in csv.reader(stream):
                if row and row[0]:
                    yield row[0], os.path.normpath(os.path.join(base, row[0]))
    except OSError:
        return


@dataclass(frozen=True)
class TorchRecord:
    """torch's RECORD and the site's RECORDs, before the installer runs."""

    version: str
    record: Path
    #: sha256 of torch's RECORD, and its (size, mtime, inode).
    sha256: str
    stat: StatKey
    #: Every file torch's RECORD lists: absolute normalized path -> as RECORD writes it.
    files: dict[str, str]
    #: The site folders' RECORDs before the installer ran.
    before: dict[Path, StatKey | None]
    #: When the installer was about to run (for :func:`_touched_since`).
    started_ns: int


def torch_record(installed: Installed, version: str) -> TorchRecord | None:
    """The snapshot of torch before an installer runs (None: torch has no RECORD)."""
    if installed.torch_dist_info is None:
        return None
    record = installed.torch_dist_info / "RECORD"
    try:
        text = read_regular(record, "torch's RECORD", OSError, limit=_MAX_RECORD)
    except OSError:
        return None
    stat = _stat(record)
    if stat is None:
        return None
    files = {absolute: shown for shown, absolute in _recorded_paths(record)}
    return TorchRecord(version, record, hashlib.sha256(text).hexdigest(), stat, files,
                       _records(installed.site), time.time_ns() - _CLOCK_SLACK_NS)


def _written(before: TorchRecord) -> dict[str, str]:
    """The files the run's new or rewritten RECORDs (torch's aside) list."""
    written: dict[str, str] = {}
    for record, stat in _records(sorted({r.parent.parent for r in before.before}
                                        | {before.record.parent.parent})).items():
        if record == before.record or (stat is not None and before.before.get(record) == stat):
            continue
        written.update({absolute: shown for shown, absolute in _recorded_paths(record)})
    return written


def _touched_since(before: TorchRecord) -> list[str]:
    """torch's recorded files whose status changed since the installer started."""
    touched = []
    for absolute, shown in before.files.items():
        try:
            if os.stat(absolute, follow_symlinks=False).st_ctime_ns >= before.started_ns:
                touched.append(shown)
        except OSError:
            touched.append(shown)  # removed
    return touched


def torch_changes(before: TorchRecord, installer_failed: bool = False) -> str | None:
    """What changed in torch, said for a person (None: nothing)."""
    stat = _stat(before.record)
    if stat is None:
        versions = sorted(p.name for p in before.record.parent.parent.glob("torch-*.dist-info"))
        if versions:
            after = versions[0].removeprefix("torch-").removesuffix(".dist-info")
            return (f"the installer changed torch from {before.version} to {after}: "
                    f"reinstall torch=={before.version}")
        return f"the installer removed torch {before.version}: reinstall torch=={before.version}"
    changed = sorted(before.files[path] for path in _written(before).keys() & before.files.keys())
    if installer_failed:
        changed = sorted(set(changed) | set(_touched_since(before)))
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return (f"the installer changed torch's installed files: {changed[0]}{more}: "
                f"reinstall torch=={before.version} (pip install --force-reinstall --no-deps)")
    if stat != before.stat:
        try:
            same = hashlib.sha256(read_regular(before.record, "torch's RECORD", OSError,
                                               limit=_MAX_RECORD)).hexdigest() == before.sha256
        except OSError:
            same = False
        return None if same and stat[2] == before.stat[2] else \
            (f"the installer rewrote torch {before.version}'s RECORD: reinstall "
             f"torch=={before.version}")
    return None
