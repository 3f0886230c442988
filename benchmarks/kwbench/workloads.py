"""The kernel repositories the rows convert, as the Hub would serve them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import KERNEL_NAME, KERNELS
from .kernel import cached_variant, make_repo, release_commit, repo_files, variant_names


@dataclass(frozen=True)
class KernelRepo:
    org: str
    path: Path  # the git repository (worktree)
    variants: tuple[str, ...]
    files: tuple[str, ...]  # every file at v1.0.0
    commit: str

    @property
    def repo_id(self) -> str:
        return f"{self.org}/{KERNEL_NAME}"


def _repo(org: str, variants: dict[str, Path]) -> KernelRepo:
    path = make_repo(KERNELS / "repos" / org / KERNEL_NAME, variants)
    return KernelRepo(org, path, tuple(variants), tuple(repo_files(path)), release_commit(path))


def release_repo(count: int, so_mb: int) -> KernelRepo:
    """A release of ``count`` variants, each with a ``so_mb`` MB extension. Variant k is
    the same folder in every release that has it (built once)."""
    names = variant_names(count)
    return _repo(f"kwbench-{count}x{so_mb}mb",
                 {name: cached_variant(name, so_mb, seed=k) for k, name in enumerate(names)})


def big_binary_repo(binary_mb: int) -> KernelRepo:
    """One CUDA variant whose extension is ``binary_mb`` MB (the peak-RSS rows)."""
    name = "torch213-cxx11-cu128-x86_64-linux"
    return _repo(f"kwbench-big-{binary_mb}mb",
                 {name: cached_variant(name, binary_mb, seed=1000 + binary_mb)})
