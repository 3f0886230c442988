#!/usr/bin/env python3
"""kernel-wheels performance benchmark (issue #10): one command, one table.

    .venv/bin/python -m benchmarks.run            # full sizes (tens of minutes)
    .venv/bin/python -m benchmarks.run --quick    # every row, small sizes (a few minutes)
    .venv/bin/python -m benchmarks.run --rows to-wheel,check --runs 5

Builds a realistic Hub kernel (real ELF extensions carrying slices of torch's libraries),
serves it with olah on 127.0.0.1, and measures kernel-wheels against real baselines in
the same run: the old ``kernels to-wheel``, limit passes, a plain download, auditwheel,
simple503, pip and uv. Prints medians of --runs runs (at least 3; 5 by default, 3 with
--quick), interleaved, and writes every sample to
benchmarks/results/<date>.json. docs/benchmarks.md says what each row measures.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import importlib
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.kwbench import olah
from benchmarks.kwbench.bench import Bench
from benchmarks.kwbench.config import BENCHMARKS, FULL, QUICK, RESULTS, ROOT, VENV_BIN, WORK, Sizes
from benchmarks.kwbench.measure import compile_tools, load
from benchmarks.kwbench.old_tool import ensure_old_tool, versions
from benchmarks.kwbench.report import Row, legend, table, write_json
from benchmarks.kwbench.rows import GROUPS, check, cold, index, install, mirror, rss, serve, to_wheel
from benchmarks.kwbench.venvs import frozen
from benchmarks.kwbench.workloads import KernelRepo, big_binary_repo, release_repo

RUNNERS = {"to-wheel": to_wheel.run, "cold": cold.run, "rss": rss.run, "check": check.run,
           "index": index.run, "install": install.run, "serve": serve.run, "mirror": mirror.run}
NEEDS_HUB = {"to-wheel", "cold", "rss", "serve"}


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def compressor() -> str:
    """What kernel-wheels deflates with ("zlib-ng:6"), as it declares it; zlib:6 if it
    declares nothing (zipfile's default deflate, level 6)."""
    # Newest layout first: the benchmark may time an older checkout of kernel-wheels.
    for module in ("kernel_wheels.wheel.compression", "kernel_wheels.wheelwriter",
                   "kernel_wheels.compression"):
        try:
            value = getattr(importlib.import_module(module), "COMPRESSOR", None)
        except Exception:  # the module may be missing or mid-edit: fall through
            continue
        if isinstance(value, str):
            return value
    return "zlib:6"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: every row in minutes")
    parser.add_argument("--rows", default=",".join(GROUPS),
                        help=f"comma-separated row groups (default all): {', '.join(GROUPS)}")
    parser.add_argument("--runs", type=int,
                        help="runs per measurement (default 5, 3 with --quick; minimum 3)")
    parser.add_argument("--counts", help="variant counts of the to-wheel rows, e.g. 4,16,64")
    parser.add_argument("--so-mb", type=int, help="size of each variant's extension in MB")
    parser.add_argument("--output", type=Path, help="JSON file (default benchmarks/results/<date>.json)")
    args = parser.parse_args()
    args.groups = [g.strip() for g in args.rows.split(",") if g.strip()]
    unknown = set(args.groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown row group(s) {', '.join(sorted(unknown))}: choose from {', '.join(GROUPS)}")
    if args.runs is not None and args.runs < 3:
        parser.error("--runs: at least 3 (the table shows medians)")
    return args


def sizes_from(args: argparse.Namespace) -> Sizes:
    sizes = (QUICK if args.quick else FULL).with_runs(args.runs)
    if args.counts:
        counts = tuple(int(c) for c in args.counts.split(","))
        sizes = replace(sizes, variant_counts=counts, limit_counts=counts[:1], cold_count=counts[0])
    if args.so_mb:
        sizes = replace(sizes, so_mb=args.so_mb)
    return sizes


def build_repos(sizes: Sizes, groups: list[str]) -> dict[str, KernelRepo]:
    """The kernel repositories the chosen rows convert (built once, cached in .work)."""
    counts: set[int] = set()
    if "to-wheel" in groups or "serve" in groups:
        counts.update(sizes.variant_counts)
    if "cold" in groups:
        counts.add(sizes.cold_count)
    repos = {}
    for count in sorted(counts):
        progress(f"kernel repo: {count} variants x {sizes.so_mb} MB")
        repos[f"release/{count}"] = release_repo(count, sizes.so_mb)
    if "rss" in groups:
        for binary_mb in sizes.rss_binary_mb:
            progress(f"kernel repo: one variant with a {binary_mb} MB binary")
            repos[f"big/{binary_mb}"] = big_binary_repo(binary_mb)
    return repos


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "changed_files": len(git("status", "--porcelain", "--untracked-files=no").splitlines())}


def run_groups(bench: Bench, groups: list[str]) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    loads: dict[str, Any] = {}
    for group in groups:
        progress(f"[{group}] load average {load()[0]:.2f}")
        before, started = load(), time.monotonic()
        try:
            rows += RUNNERS[group](bench)
        except Exception as exc:  # one broken row group must not hide the others
            progress(traceback.format_exc())
            rows.append(Row(group, f"{group} (failed)", "see the error", "s",
                            error=f"{type(exc).__name__}: {exc}"))
        loads[group] = {"load_before": before, "load_after": load(),
                        "seconds": round(time.monotonic() - started, 1)}
    return rows, loads


def main() -> int:
    args = parse_args()
    sizes = sizes_from(args)
    WORK.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    chosen = compressor()
    progress(f"kernel-wheels benchmark ({'quick' if args.quick else 'full'} sizes, {sizes.runs} runs; "
             f"compressor {chosen}; load {load()[0]:.2f} on {_cpus()} CPUs)")
    old = ensure_old_tool(progress) if "to-wheel" in args.groups else None
    # Every tool runs from byte code, as installed; the limit passes too.
    compile_tools(VENV_BIN / "python", "kernel_wheels")
    compileall.compile_dir(BENCHMARKS / "kwbench", quiet=1)
    repos = build_repos(sizes, args.groups)
    if NEEDS_HUB & set(args.groups):
        with olah.serve(repos.values()) as hub:
            rows, loads = run_groups(Bench(sizes, hub, repos, chosen, old, progress), args.groups)
    else:
        rows, loads = run_groups(Bench(sizes, None, repos, chosen, old, progress), args.groups)

    print(table(rows))
    print()
    print(legend(rows))
    end_load = load()
    print(f"\n{sizes.runs} runs per figure, medians; compressor {chosen}; load average at the end "
          f"{end_load[0]:.2f} / {end_load[1]:.2f} / {end_load[2]:.2f} on {_cpus()} CPUs")
    output = args.output or RESULTS / f"{started:%Y-%m-%dT%H%M%SZ}.json"
    write_json(output, rows, {
        "date": started.isoformat(timespec="seconds"), "quick": args.quick, "sizes": asdict(sizes),
        "compressor": chosen, "machine": {"cpus": _cpus(), "platform": platform.platform(),
                                          "python": sys.version.split()[0], "load_end": end_load},
        "groups": loads, "kernel_wheels_git": git_state(), "old_tool_venv": versions().splitlines(),
        "simple503_venv": frozen(index.SIMPLE503_VENV), "tools": _tool_versions(),
        "seconds": round((datetime.datetime.now(datetime.UTC) - started).total_seconds(), 1)})
    print(f"results: {output}")
    return 1 if any(r.error for r in rows) else 0


def _tool_versions() -> dict[str, str]:
    """The peers that come with kernel-wheels' own venv: pip, uv, auditwheel."""
    found = {}
    for name in ("pip", "uv", "auditwheel"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _cpus() -> int:
    return os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
