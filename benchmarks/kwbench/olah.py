"""olah on 127.0.0.1 as the Hub: offline mode, serving local git repositories, started
by the tests' own olah helper (``tests/support/helpers.py``).

Each kernel repository is served both as a ``kernel`` repo (what kernel-wheels asks for
first) and as a ``model`` repo (the only kind the old ``kernels to-wheel`` knows), from
the same git repository through symlinks.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.helpers import free_port, olah_server, stop

from .config import KERNEL_NAME, WORK
from .workloads import KernelRepo

__all__ = ["Hub", "free_port", "serve", "stop"]


@dataclass(frozen=True)
class Hub:
    endpoint: str
    log: Path

    def resolve_url(self, repo: KernelRepo, path: str) -> str:
        """The URL huggingface_hub downloads a file of a ``kernel`` repo from (the repo
        type kernel-wheels uses when both exist)."""
        return f"{self.endpoint}/kernels/{repo.repo_id}/resolve/{repo.commit}/{path}"


@contextmanager
def serve(repos: Iterable[KernelRepo]) -> Iterator[Hub]:
    """Start olah for ``repos``; stopped on exit, also on error."""
    repos = list(repos)
    root = WORK / "olah"
    shutil.rmtree(root, ignore_errors=True)
    mirror = root / "mirror"
    for repo in repos:
        for kind in ("models", "kernels"):
            link = mirror / kind / repo.org / KERNEL_NAME
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(repo.path, target_is_directory=True)
    # olah's GET / answers 500: the helper asks for a repository's main branch instead
    with olah_server(root, mirror, f"models/{repos[0].repo_id}") as server:
        yield Hub(server.endpoint, server.log)
