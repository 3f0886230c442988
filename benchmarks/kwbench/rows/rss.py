"""Peak memory converting one variant whose binary is 100 MB, and 1 GB (full sizes).

Measured on warm, offline to-wheel runs (checks on), sampling the whole process tree
(see ``measure``). The untimed online warm-up run (download included) is sampled too
and reported in the note.
"""

from __future__ import annotations

from ..bench import Bench
from ..measure import run_interleaved, run_once
from ..report import Row, Target

LIMIT_MB = 200  # issue #10: peak RSS < 200 MB, whatever the binary size


def run(bench: Bench) -> list[Row]:
    rows: list[Row] = []
    peaks: dict[int, float] = {}
    for binary_mb in bench.sizes.rss_binary_mb:
        repo = bench.repos[f"big/{binary_mb}"]
        bench.progress(f"  peak RSS, one variant with a {binary_mb} MB binary ({repo.repo_id})")
        warmup = bench.ours_to_wheel(f"rss-warmup-{binary_mb}", repo, offline=False)
        warmup.sample_rss = True
        cold = run_once(warmup)
        job = bench.ours_to_wheel(f"rss-{binary_mb}", repo, offline=True)
        job.sample_rss = True
        run_interleaved([job], bench.sizes.runs, bench.progress)
        peaks[binary_mb] = job.median_rss / 1e6
        rows.append(Row(
            f"rss/{binary_mb}", f"peak RSS, {binary_mb} MB binary",
            f"largest sum of RSS over kernel-wheels' process tree (workers included), sampled "
            f"every 5 ms, converting one variant with a {binary_mb} MB .so, warm",
            "MB", peaks[binary_mb], None, Target("value_below", LIMIT_MB),
            note=(f"wall {job.median_s:.2f} s; cold run (download included): peak "
                  f"{(cold.peak_rss or 0) / 1e6:.0f} MB in {cold.seconds:.2f} s"),
            samples={"ours": [(s.peak_rss or 0) / 1e6 for s in job.samples],
                     "seconds": [s.seconds for s in job.samples]}))
    if len(peaks) >= 2:
        small, large = min(peaks), max(peaks)
        rows.append(Row(
            "rss/growth", f"peak RSS, {large} vs {small} MB binary",
            "the two peaks above as a ratio: memory independent of binary size means ~1.0x",
            "MB", peaks[large], peaks[small], Target("ratio_max", 1.1)))
    return rows
