"""Warm to-wheel against the old tool and the limit passes; wheel sizes; scaling.

Per variant count, in one interleaved set of runs: kernel-wheels (default options,
checks on), the old ``kernels to-wheel``, and at the limit counts the two limit passes.
Both tools first convert once online (untimed: fills their HF caches), then every timed
run is offline from the warm cache into an empty output folder.
"""

from __future__ import annotations

from ..bench import OUT, Bench, snapshot_files, total_mb
from ..measure import Job, run_interleaved, run_once
from ..report import Row, Target


def _target_vs_old(count: int) -> Target:
    # issue #10: <= 0.3x the old tool at 4 variants, <= 0.25x at 64
    return Target("ratio_max", 0.25 if count >= 64 else 0.3)


def _seconds(job: Job) -> list[float]:
    return [s.seconds for s in job.samples]


def run(bench: Bench) -> list[Row]:
    rows: list[Row] = []
    per_count: dict[int, tuple[float, float]] = {}  # count -> (ours, old) medians
    for count in bench.sizes.variant_counts:
        repo = bench.repos[f"release/{count}"]
        bench.progress(f"  to-wheel, {count} variants x {bench.sizes.so_mb} MB ({repo.repo_id})")
        run_once(bench.ours_to_wheel(f"warmup-ours-{count}", repo, offline=False))
        run_once(bench.old_to_wheel(f"warmup-old-{count}", repo, offline=False))
        ours = bench.ours_to_wheel(f"ours-{count}", repo, offline=True)
        old = bench.old_to_wheel(f"old-{count}", repo, offline=True)
        jobs = [ours, old]
        limits: dict[str, Job] = {}
        if count in bench.sizes.limit_counts:
            files = snapshot_files(repo)
            for spec in dict.fromkeys(("zlib:6", bench.compressor)):  # once if they are the same
                limits[spec] = bench.limit_pass(f"limit-{spec.replace(':', '')}-{count}", files, spec)
            jobs += limits.values()
        run_interleaved(jobs, bench.sizes.runs, bench.progress)
        per_count[count] = (ours.median_s, old.median_s)

        rows.append(Row(
            f"to-wheel/{count}", f"to-wheel warm, {count} variants vs old tool",
            f"kernel-wheels to-wheel (default options, checks on) vs kernels 0.11.3 to-wheel, "
            f"{count} variants x {bench.sizes.so_mb} MB .so, both offline from a warm HF cache",
            "s", ours.median_s, old.median_s, _target_vs_old(count),
            samples={"ours": _seconds(ours), "baseline": _seconds(old)}))
        ours_mb, old_mb = total_mb(OUT / ours.name), total_mb(OUT / old.name)
        rows.append(Row(
            f"size/{count}", f"wheel size, {count} variants vs old tool",
            "total bytes of the wheels each tool wrote for the same release (deflate output)",
            "MB", ours_mb, old_mb, Target("ratio_max", 1.03)))
        for spec, job in limits.items():
            chosen = spec == bench.compressor
            rows.append(Row(
                f"limit/{spec}/{count}", f"to-wheel {count} variants vs read+{spec} limit",
                f"the same to-wheel runs vs reading every byte of the same cached files once and "
                f"deflating it with {spec} on all cores (multiprocessing, one task per file)"
                + (" - the compressor kernel-wheels uses" if chosen else ""),
                "s", ours.median_s, job.median_s, Target("ratio_max", 1.2) if chosen else None,
                samples={"ours": _seconds(ours), "baseline": _seconds(job)}))
    if len(per_count) >= 2:
        rows.append(_scaling(per_count))
    return rows


def _slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of y on x."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    return slope, mean_y - slope * mean_x


def _scaling(per_count: dict[int, tuple[float, float]]) -> Row:
    counts = sorted(per_count)
    small, large = counts[0], counts[-1]
    ours_slope, ours_fixed = _slope([(c, per_count[c][0]) for c in counts])
    old_slope, _ = _slope([(c, per_count[c][1]) for c in counts])
    per_variant = {c: per_count[c][0] / c for c in counts}
    return Row(
        "scaling", f"time per variant, {large} vs {small} variants",
        f"kernel-wheels' warm to-wheel median divided by the variant count, at {large} vs at "
        f"{small} variants (constant or falling = no superlinear cost)",
        "s/variant", per_variant[large], per_variant[small], Target("ratio_max", 1.1),
        note=(f"slope {ours_slope:.3f} s/variant + {ours_fixed:.2f} s fixed (least squares over "
              f"{', '.join(map(str, counts))} variants); per variant: "
              + ", ".join(f"{c}: {per_variant[c]:.3f} s" for c in counts)
              + f"; old tool slope {old_slope:.3f} s/variant"))
