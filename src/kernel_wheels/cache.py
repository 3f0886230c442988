"""kernel-wheels' own cache folder (git mirrors, commit times of Hub revisions).

``KERNEL_WHEELS_CACHE`` if set, else ``$XDG_CACHE_HOME/kernel-wheels`` (``~/.cache``).
Only immutable facts are kept (a commit's time never changes; the Hub's first answer
about a commit's publisher is kept as that, never replaced), so the cache can never be
stale, only missing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .reading import read_text

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def cache_dir(kind: str) -> Path:
    base = os.environ.get("KERNEL_WHEELS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernel-wheels")
    return Path(base) / kind


def _commit_file(commit: str) -> Path | None:
    """The file of a commit's time; None for anything that is not a commit id (the id
    comes from a remote answer and becomes a file name)."""
    return cache_dir("commit-times") / commit if _COMMIT.fullmatch(commit) else None


def read_commit_time(commit: str) -> int | None:
    path = _commit_file(commit)
    if path is None:
        return None
    try:
        return int(read_text(path, "a cached commit time", ValueError, 64).strip())
    except (OSError, ValueError):
        return None


def write_commit_time(commit: str, seconds: int) -> None:
    if _commit_file(commit) is None:
        return
    folder = cache_dir("commit-times")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{commit}.{os.getpid()}"
        temp.write_text(f"{seconds}\n")
        os.replace(temp, folder / commit)
    except OSError:
        pass  # a cache that cannot be written only costs a later offline run its timestamp


def read_publisher_trust(commit: str) -> bool | None:
    """The Hub's trusted-publisher flag for a commit's publisher as it was when the
    commit was first converted here (None: never asked, or not answered)."""
    if not _COMMIT.fullmatch(commit):
        return None
    try:
        text = read_text(cache_dir("publisher-trust") / commit, "a cached publisher flag", ValueError,
                         64).strip()
    except (OSError, ValueError):
        return None
    return {"true": True, "false": False}.get(text)


def write_publisher_trust(commit: str, trusted: bool) -> None:
    """Kept once, never replaced: a wheel of this commit records the same flag online
    and offline, run after run (the first answer is the fact kept)."""
    if not _COMMIT.fullmatch(commit):
        return
    folder = cache_dir("publisher-trust")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{commit}.{os.getpid()}"
        temp.write_text("true\n" if trusted else "false\n")
        if not (folder / commit).exists():
            os.replace(temp, folder / commit)
        else:
            temp.unlink()
    except OSError:
        pass  # a cache that cannot be written only costs an offline run the flag
