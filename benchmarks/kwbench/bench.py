"""What every row needs: sizes, the Hub, the repositories, the two tools and their caches.

Caches (under .work/, kept between invocations):
- ``hf-ours`` + ``kw-cache``: kernel-wheels' HF cache and its own cache (commit times);
- ``hf-old``: the old tool's HF cache (its own huggingface_hub version).
"Warm" runs use these, with HF_HUB_OFFLINE=1 for both tools (the old tool must run
offline from its cache; ours is run the same way so that neither asks olah anything).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import KERNEL_NAME, KERNEL_WHEELS, RELEASE, ROOT, WORK, Sizes
from .measure import Job, base_env
from .olah import Hub
from .workloads import KernelRepo

HF_OURS = WORK / "hf-ours"
KW_CACHE = WORK / "kw-cache"
HF_OLD = WORK / "hf-old"
OUT = WORK / "out"

Progress = Callable[[str], None]


@dataclass
class Bench:
    sizes: Sizes
    hub: Hub | None  # olah, when a chosen row needs the Hub
    repos: dict[str, KernelRepo]  # "release/<count>", "big/<MB>"
    compressor: str  # what kernel-wheels deflates with, e.g. "zlib-ng:6"
    old_tool: Path | None  # the old `kernels` executable
    progress: Progress

    @property
    def olah(self) -> Hub:
        if self.hub is None:
            raise RuntimeError("this row needs the Hub (olah), which was not started")
        return self.hub

    # -- environments -------------------------------------------------------------
    def ours_env(self, *, offline: bool, hf_home: Path = HF_OURS,
                 kw_cache: Path = KW_CACHE) -> dict[str, str]:
        env = base_env()
        env.update(HF_ENDPOINT=self.olah.endpoint, HF_HOME=str(hf_home),
                   KERNEL_WHEELS_CACHE=str(kw_cache))
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def old_env(self, *, offline: bool) -> dict[str, str]:
        env = base_env()
        env.update(HF_ENDPOINT=self.olah.endpoint, HF_HOME=str(HF_OLD))
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    # -- jobs ---------------------------------------------------------------------
    def ours_to_wheel(self, name: str, repo: KernelRepo, *, offline: bool, extra: tuple[str, ...] = (),
                      expect: int | None = None, hf_home: Path = HF_OURS,
                      kw_cache: Path = KW_CACHE) -> Job:
        out = OUT / name
        return Job(name, [str(KERNEL_WHEELS), "to-wheel", repo.repo_id, RELEASE, "-o", str(out), *extra],
                   self.ours_env(offline=offline, hf_home=hf_home, kw_cache=kw_cache),
                   prepare=lambda: fresh(out),
                   verify=lambda: expect_wheels(out, len(repo.variants) if expect is None else expect))

    def old_to_wheel(self, name: str, repo: KernelRepo, *, offline: bool) -> Job:
        assert self.old_tool is not None
        out = OUT / name
        return Job(name, [str(self.old_tool), "to-wheel", repo.repo_id, RELEASE],
                   self.old_env(offline=offline), cwd=out, prepare=lambda: fresh(out),
                   verify=lambda: expect_wheels(out, len(repo.variants)))

    def limit_pass(self, name: str, files: list[Path], compressor: str) -> Job:
        listing = WORK / "lists" / f"{name}.txt"
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text("".join(f"{p}\n" for p in files))
        env = {**base_env(), "PYTHONPATH": str(ROOT)}
        return Job(name, [sys.executable, "-m", "benchmarks.kwbench.limit_pass", "--compressor", compressor,
                          "--files-from", str(listing)], env)


def fresh(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def wheels_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.whl"))


def expect_wheels(folder: Path, count: int) -> None:
    found = wheels_in(folder)
    if len(found) != count:
        raise RuntimeError(f"expected {count} wheels in {folder}, found {len(found)}")


def total_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in wheels_in(folder)) / 1e6


def snapshot_files(repo: KernelRepo) -> list[Path]:
    """The variant files kernel-wheels reads when converting ``repo`` from its warm HF
    cache (the blobs the snapshot links to); the repository's own files if not cached."""
    for snapshot in HF_OURS.glob(f"hub/*--{repo.org}--{KERNEL_NAME}/snapshots/{repo.commit}"):
        files = [p.resolve() for p in sorted((snapshot / "build").rglob("*")) if p.is_file()]
        if files:
            return files
    return [p for p in sorted((repo.path / "build").rglob("*")) if p.is_file()]


def command_exists(*words: str) -> bool:
    """Whether ``kernel-wheels WORDS --help`` works (commands still being written)."""
    proc = subprocess.run([str(KERNEL_WHEELS), *words, "--help"], capture_output=True, env=base_env())
    return proc.returncode == 0
