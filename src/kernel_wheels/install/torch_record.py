""""torch unchanged", measured: torch's RECORD and every file it lists, before and after.

The installer runs with torch pinned, but a pin holds only torch's *version*: any wheel
it installs (the kernel's dependencies come from the index too) may write files into
``torch/``, and pip checks no file ownership. torch's version and RECORD read the same
afterwards. So the statement rests on a snapshot taken in the target Python: torch's
version, its RECORD's sha256, and (size, mtime, inode) of every file RECORD lists. A
file rewritten in place changes its mtime; one replaced (pip unlinks first) its inode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProbeError
from .environment import run_probe_in_scratch

PROBE = r"""
import hashlib, importlib.metadata as metadata, json, os
try:
    dist = metadata.distribution("torch")
except metadata.PackageNotFoundError:
    print(json.dumps(None))
    raise SystemExit
record = (dist.read_text("RECORD") or "").encode("utf-8", "surrogateescape")
files = {}
for path in dist.files or []:
    try:
        found = os.stat(dist.locate_file(path))
        files[str(path)] = [found.st_size, found.st_mtime_ns, found.st_ino]
    except OSError:
        files[str(path)] = None
print(json.dumps({"version": dist.version, "record": hashlib.sha256(record).hexdigest(),
                  "files": files}))
"""


@dataclass(frozen=True)
class TorchRecord:
    version: str
    #: sha256 of torch's RECORD text.
    record: str
    #: Every path RECORD lists -> (size, mtime_ns, inode), or None when it is missing.
    files: dict[str, tuple[int, int, int] | None]

    def changed_files(self, after: TorchRecord) -> list[str]:
        """The paths whose state differs, or that one snapshot lists and the other not."""
        return sorted(path for path in self.files.keys() | after.files.keys()
                      if self.files.get(path, False) != after.files.get(path, False))


def torch_record(python: str, timeout: float = 120) -> TorchRecord | None:
    """The snapshot of torch in ``python`` (None when torch is not installed)."""
    answer = run_probe_in_scratch(Path(python), PROBE, "read torch's installed files in", timeout)
    if answer is None:
        return None
    try:
        return TorchRecord(str(answer["version"]), str(answer["record"]),
                           {str(path): _state(value) for path, value in answer["files"].items()})
    except (TypeError, KeyError, ValueError, AttributeError):
        raise EnvironmentProbeError(f"unexpected answer from the Python at {python}") from None


def _state(value: Any) -> tuple[int, int, int] | None:
    if value is None:
        return None
    size, mtime, inode = value
    return int(size), int(mtime), int(inode)


def torch_changes(before: TorchRecord, after: TorchRecord | None) -> str | None:
    """What changed in torch, said for a person (None: nothing)."""
    if after is None:
        return f"the installer removed torch {before.version}: reinstall torch=={before.version}"
    if after.version != before.version:
        return (f"the installer changed torch from {before.version} to {after.version}: "
                f"reinstall torch=={before.version}")
    changed = before.changed_files(after)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return (f"the installer changed torch's installed files: {changed[0]}{more}: "
                f"reinstall torch=={before.version} (pip install --force-reinstall --no-deps)")
    if after.record != before.record:
        return (f"the installer rewrote torch {before.version}'s RECORD: reinstall "
                f"torch=={before.version}")
    return None
