"""Cold conversion (empty caches) against a plain parallel download of the same files.

Ours: ``kernel-wheels to-wheel`` online with an empty HF cache and an empty kernel-wheels
cache: it resolves the tag, lists and downloads every variant plus the card, converts
and checks. Baseline: ``kwbench.download``, 8 threads GETting the same files (every file
at v1.0.0: build/ and README.md) from olah's resolve URLs to disk, nothing else.
For reference, huggingface_hub's ``snapshot_download`` of the same files is timed too:
the part of the gap that any Hub client pays (HEAD requests, cache bookkeeping).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..bench import OUT, Bench, fresh
from ..config import RELEASE, ROOT, WORK
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target

THREADS = 8  # what huggingface_hub's snapshot_download uses by default


def _expect_bytes(folder: Path, expected: int) -> None:
    got = sum(p.stat().st_size for p in folder.iterdir())
    if got != expected:
        raise RuntimeError(f"plain download wrote {got} bytes, expected {expected}")


def run(bench: Bench) -> list[Row]:
    count = bench.sizes.cold_count
    repo = bench.repos[f"release/{count}"]
    bench.progress(f"  cold to-wheel vs plain parallel download, {count} variants ({repo.repo_id})")
    cold_home, cold_cache = WORK / "cold" / "hf-home", WORK / "cold" / "kw-cache"
    ours = bench.ours_to_wheel(f"cold-ours-{count}", repo, offline=False, hf_home=cold_home,
                               kw_cache=cold_cache)
    make_output = ours.prepare

    def empty_caches() -> None:
        fresh(cold_home)
        fresh(cold_cache)
        if make_output:
            make_output()

    ours.prepare = empty_caches

    listing = WORK / "lists" / f"cold-urls-{count}.txt"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text("".join(f"{bench.olah.resolve_url(repo, path)}\n" for path in repo.files))
    dest = OUT / f"cold-download-{count}"
    expected = sum((repo.path / path).stat().st_size for path in repo.files)
    download = Job(f"cold-download-{count}",
                   [sys.executable, "-m", "benchmarks.kwbench.download", "--dest", str(dest), "--urls-from",
                    str(listing), "--threads", str(THREADS)],
                   {**base_env(), "PYTHONPATH": str(ROOT)},
                   prepare=lambda: fresh(dest), verify=lambda: _expect_bytes(dest, expected))
    hub_home = WORK / "cold" / "hf-home-snapshot"
    snapshot = Job(f"cold-snapshot-download-{count}",
                   [sys.executable, "-m", "benchmarks.kwbench.hub_download", repo.repo_id, f"v{RELEASE}"],
                   {**bench.ours_env(offline=False, hf_home=hub_home), "PYTHONPATH": str(ROOT)},
                   prepare=lambda: fresh(hub_home))
    run_interleaved([ours, download, snapshot], bench.sizes.runs, bench.progress)
    return [Row(
        f"cold/{count}", f"to-wheel cold, {count} variants vs plain download",
        f"kernel-wheels to-wheel with empty caches (resolve, download, convert, check) vs "
        f"{THREADS} threads downloading the same {len(repo.files)} files ({expected / 1e6:.0f} MB) "
        "from olah on 127.0.0.1",
        "s", ours.median_s, download.median_s, Target("ratio_max", 1.2),
        samples={"ours": [s.seconds for s in ours.samples],
                 "baseline": [s.seconds for s in download.samples]}),
        Row(f"cold/snapshot/{count}", f"  for reference: snapshot_download, {count} variants",
            "huggingface_hub's snapshot_download of the same release into an empty HF cache "
            "(what a Hub client pays before converting anything) vs the plain download",
            "s", snapshot.median_s, download.median_s,
            samples={"ours": [s.seconds for s in snapshot.samples],
                     "baseline": [s.seconds for s in download.samples]})]
