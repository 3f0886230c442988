"""kernel-wheels' own cache folder (git mirrors, commit times of Hub revisions).

``KERNEL_WHEELS_CACHE`` if set, else ``$XDG_CACHE_HOME/kernel-wheels`` (``~/.cache``).
Only immutable facts are kept (a commit's time never changes), so the cache can never
be stale, only missing.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(kind: str) -> Path:
    base = os.environ.get("KERNEL_WHEELS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernel-wheels")
    return Path(base) / kind


def read_commit_time(commit: str) -> int | None:
    path = cache_dir("commit-times") / commit
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_commit_time(commit: str, seconds: int) -> None:
    folder = cache_dir("commit-times")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{commit}.{os.getpid()}"
        temp.write_text(f"{seconds}\n")
        os.replace(temp, folder / commit)
    except OSError:
        pass  # a cache that cannot be written only costs a later offline run its timestamp
