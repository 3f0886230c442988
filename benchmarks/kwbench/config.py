"""Where things live and how big the workloads are (full vs --quick)."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
#: git-ignored: venvs, kernels, repos, caches, wheels. KWBENCH_WORK puts it elsewhere
#: (the test of --quick runs in a folder of its own: tests/test_benchmarks.py).
WORK = Path(os.environ.get("KWBENCH_WORK") or BENCHMARKS / ".work").absolute()
#: What is built from the workload (variant folders, their repositories, the index and
#: check wheels), in a folder named for how it is built: a change in how a variant is
#: made starts from new folders instead of reusing stale ones (2: the GPU variants carry
#: real device code).
KERNELS = WORK / "kernels-2"
RESULTS = BENCHMARKS / "results"

VENV_BIN = Path(sys.executable).parent  # the project's .venv: run.py is started with its python
KERNEL_WHEELS = VENV_BIN / "kernel-wheels"
AUDITWHEEL = VENV_BIN / "auditwheel"


def torch_lib() -> Path:
    """torch/lib of the running venv, found without importing torch (slow)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("benchmarks: torch is not installed in this venv (run with .venv/bin/python)")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


OLD_TOOL_REQUIREMENTS = ("kernels==0.11.3", "huggingface_hub<2", "wheel")
#: The index rows' peer: a static PEP 503 index generator (copies, hashes, extracts METADATA).
SIMPLE503_REQUIREMENTS = ("simple503==0.4.0",)
#: The project's sample kernel (img2gray): built with `kernel-wheels build` for this venv's
#: torch, its wheel is what the check and install rows start from.
SAMPLE = ROOT / "sample-kernel"
SAMPLE_VERSION = "1.1.2"
KERNEL_NAME = "bench-attention"  # the Hub repo name, the kernel name and (with _) the module
RELEASE = "1.0.0"  # tag v1.0.0


@dataclass(frozen=True)
class Sizes:
    """Workload sizes. Full sizes are the ones issue #10 states; --quick shrinks every
    workload so that all rows run end to end in a few minutes."""

    so_mb: int  # size of each variant's extension module (a real ELF)
    variant_counts: tuple[int, ...]  # to-wheel vs the old tool at these counts
    limit_counts: tuple[int, ...]  # ... and vs the limit passes at these
    cold_count: int  # cold conversion vs plain download at this count
    rss_binary_mb: tuple[int, ...]  # peak RSS with one variant holding a binary this big
    check_elf: str  # a torch library from .venv, packed into a wheel for the check row
    check_gpu_mb: int  # a CUDA variant with this much extension, for the "50 MB wheel" row
    index_wheels: int  # `kernel-wheels index` from scratch over this many wheels
    index_vs_peer: tuple[int, ...]  # `index` vs `simple503 -c` over these many (of index_wheels)
    serve_index_seconds: float  # how long index pages are requested for the rps figure
    runs: int

    def with_runs(self, runs: int | None) -> Sizes:
        return self if runs is None else replace(self, runs=runs)


# The extension's bytes deflate about 3:1: 160 MB make a wheel of about 51 MB.
FULL = Sizes(so_mb=48, variant_counts=(4, 16, 64), limit_counts=(4,), cold_count=4,
             rss_binary_mb=(100, 1000), check_elf="libtorch_cpu.so", check_gpu_mb=160,
             index_wheels=10_000, index_vs_peer=(1_000, 5_000), serve_index_seconds=5.0, runs=5)
QUICK = Sizes(so_mb=6, variant_counts=(4, 8, 16), limit_counts=(4,), cold_count=4,
              rss_binary_mb=(20, 200), check_elf="libc10.so", check_gpu_mb=15, index_wheels=500,
              index_vs_peer=(100, 500), serve_index_seconds=2.0, runs=3)
