"""``kernel-wheels mirror`` at scale (issue #20), on a synthetic listing (no Hub, no
conversions: ``mirror_bench.py`` says what is and is not measured):

- a re-run with nothing new over 50 repositories x 10 releases x 40 variants (< 5 s);
- indexing 100,000 wheels from scratch: every record pending, the run folds them into
  the state and writes every page (< 60 s);
- adding one: one more release of one variant to that mirror (< 1 s);
- peak memory of the from-scratch run at 25k, 50k and 100k wheels, and its slope.

Each figure is a whole process (``python mirror_bench.py run``), start-up included;
peak RSS is sampled over the process as the other rows do.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ..bench import Bench
from ..config import ROOT, WORK
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target

VARIANTS = 40
RERUN_S, SCRATCH_S, ADD_ONE_S = 5.0, 60.0, 1.0


def _cmd(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "benchmarks.kwbench.mirror_bench", *map(str, args)]


def _env() -> dict[str, str]:
    return {**base_env(), "PYTHONPATH": str(ROOT)}


def _prepare(folder: Path, repos: int, releases: int, *extra: str) -> None:
    subprocess.run(_cmd("prepare", folder, "--repos", repos, "--releases", releases, *extra),
                   check=True, env=_env(), stdout=subprocess.DEVNULL)


def _copy(base: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)


def _verify(folder: Path, repos: int) -> None:
    last = f"kernel-{repos - 1:04d}"
    if last not in (folder / "simple" / "index.html").read_text():
        raise RuntimeError(f"mirror_bench: {last} is not on {folder}/simple/index.html")


def run(bench: Bench) -> list[Row]:
    quick = bench.sizes.index_wheels < 10_000
    rerun_repos, releases = (5, 10) if quick else (50, 10)
    scales = (6, 12, 25) if quick else (62, 125, 250)  # x releases x 40 wheels
    root = WORK / "mirror"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = _env()
    rows: list[Row] = []

    bench.progress(f"  mirror: re-run, {rerun_repos} x {releases} x {VARIANTS} (preparing)")
    rerun_dir = root / "rerun"
    _prepare(rerun_dir, rerun_repos, releases, "--state")
    rerun = Job("mirror-rerun", _cmd("run", rerun_dir, "--repos", rerun_repos, "--releases", releases), env,
                sample_rss=True)
    run_interleaved([rerun], bench.sizes.runs, bench.progress)
    items = rerun_repos * releases * VARIANTS
    rows.append(Row("mirror/rerun", f"mirror: re-run, nothing new ({items:,} items)",
                    f"mirror over {rerun_repos} repositories x {releases} releases x {VARIANTS} variants "
                    "already mirrored (synthetic listing): plan, nothing converted, nothing written",
                    "s", rerun.median_s, target=Target("value_below", RERUN_S),
                    samples={"ours": [s.seconds for s in rerun.samples]}))

    peaks: dict[int, float] = {}
    scratch_jobs: dict[int, Job] = {}
    for repos in scales:
        wheels = repos * releases * VARIANTS
        bench.progress(f"  mirror: {wheels:,} wheels from scratch (preparing the records)")
        base, work = root / f"base-{repos}", root / f"scratch-{repos}"
        _prepare(base, repos, releases)
        job = Job(f"mirror-scratch-{wheels}", _cmd("run", work, "--repos", repos, "--releases", releases),
                  env, prepare=lambda b=base, w=work: _copy(b, w),
                  verify=lambda w=work, r=repos: _verify(w, r), sample_rss=True)
        run_interleaved([job], bench.sizes.runs, bench.progress)
        peaks[wheels] = job.median_rss / 1e6
        scratch_jobs[wheels] = job
        shutil.rmtree(base, ignore_errors=True)
    largest = max(scratch_jobs)
    job = scratch_jobs[largest]
    rows.append(Row("mirror/scratch", f"mirror: index {largest:,} wheels from scratch",
                    f"every record pending (as {largest:,} converted wheels leave them): fold into "
                    "the state, write every page of the root and 20 target indexes",
                    "s", job.median_s, target=Target("value_below", SCRATCH_S),
                    samples={"ours": [s.seconds for s in job.samples]}))

    repos = max(scales)
    done, added = root / f"scratch-{repos}", root / "add-one"
    _prepare(done, repos, releases, "--extra")
    base_add = root / "add-base"
    _copy(done, base_add)
    add = Job("mirror-add-one",
              _cmd("run", added, "--repos", repos, "--releases", releases, "--extra-release"), env,
              prepare=lambda: _copy(base_add, added), sample_rss=True)
    bench.progress("  mirror: add one")
    run_interleaved([add], bench.sizes.runs, bench.progress)
    rows.append(Row("mirror/add-one", f"mirror: add 1 wheel to {largest:,}",
                    "one new release of one variant, converted (its record pending), added to the "
                    f"{largest:,}-wheel mirror: plan, fold, that project's pages and the root pages",
                    "s", add.median_s, target=Target("value_below", ADD_ONE_S),
                    samples={"ours": [s.seconds for s in add.samples]}))

    for wheels, peak in sorted(peaks.items()):
        rows.append(Row(f"mirror/rss-{wheels}", f"mirror: peak RSS, {wheels:,} wheels from scratch",
                        "largest RSS of the from-scratch run above, sampled every 5 ms", "MB", peak))
    small, large = min(peaks), max(peaks)
    slope = (peaks[large] - peaks[small]) / ((large - small) / 10_000)
    rows.append(Row("mirror/rss-slope", "mirror: peak RSS growth per 10,000 wheels",
                    f"(peak at {large:,} - peak at {small:,}) / {(large - small) / 10_000:.1f}: "
                    "flat memory means ~0", "MB", slope))
    shutil.rmtree(root, ignore_errors=True)
    return rows
