"""The mirror at scale, without the Hub: a synthetic listing of R repositories x V
releases x 40 variants, and the records converting runs would have left.

Run as its own process (so that the figures include start-up, and peak RSS is the
process's own)::

    python -m benchmarks.kwbench.mirror_bench prepare DEST --repos 50 --releases 10 [--state]
    python -m benchmarks.kwbench.mirror_bench run DEST --repos 50 --releases 10 [--extra-release]

``prepare`` writes, for every (repository, release, variant), the pending record a
converting worker writes after uploading the wheel (``--state``: and then finishes, so
the records are in the state and the pages written). ``run`` is ``kernel-wheels
mirror`` with that listing: nothing to convert (every item is pending or in the state),
so it plans, folds the pending records into the state and writes every page. With
``--extra-release`` the listing has one more release of the first repository, of one
variant, whose record ``prepare --extra`` wrote: "adding one". Wheel objects are not
written: pages are made from records alone, and no page-writing step reads a wheel.
It prints one JSON line: seconds, peak RSS (``ru_maxrss``), pages written.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from kernel_wheels.kernel.variants import parse_variant
from kernel_wheels.mirror.listing import ListedRelease, RepoListing
from kernel_wheels.mirror.pipeline import MirrorOptions, mirror
from kernel_wheels.mirror.state import Record, encode, pending_key
from kernel_wheels.mirror.store import FolderDestination
from kernel_wheels.wheel.plan import TagOptions, plan_wheel

TORCH = ("torch26", "torch27", "torch28", "torch29")
BACKENDS = ("cu118", "cu126", "cu128", "rocm63", "cpu")
ARCHS = ("x86_64", "aarch64")
#: 40 variants over 20 targets, as a large kernel has them.
VARIANTS = tuple(f"{t}-cxx11-{b}-{a}-linux" for t in TORCH for b in BACKENDS for a in ARCHS)
COMMIT = "0" * 40


def _repo(index: int) -> str:
    return f"bench-org/kernel-{index:04d}"


def _version(index: int) -> str:
    return f"1.{index}.0"


def listings(repos: int, releases: int, extra: bool) -> list[RepoListing]:
    found = []
    for r in range(repos):
        rows = [ListedRelease(_version(v), f"v{_version(v)}", _commit(r, v), VARIANTS)
                for v in range(releases)]
        if extra and r == 0:
            rows.append(ListedRelease(_version(releases), f"v{_version(releases)}",
                                      _commit(r, releases), VARIANTS[:1]))
        found.append(RepoListing(_repo(r), tuple(rows)))
    return found


def _commit(repo: int, version: int) -> str:
    return f"{repo:020x}{version:020x}"


def record(repo: int, version: int, variant: str) -> Record:
    project = f"kernel-{repo:04d}"
    filename = plan_wheel(parse_variant(variant), project, _version(version), TagOptions(), project).filename
    digest = f"{(repo * 1_000_003 + version * 1009 + VARIANTS.index(variant)):064x}"
    return Record(_repo(repo), _version(version), f"v{_version(version)}", _commit(repo, version), variant,
                  filename, project, digest, 123_456, ">=3.9", digest)


def prepare(dest: Path, repos: int, releases: int, extra: bool) -> int:
    store = FolderDestination(dest)
    written = 0
    if extra:
        one = record(0, releases, VARIANTS[0])
        store.put(pending_key(one), encode(one.to_dict()))
        return 1
    for r in range(repos):
        for v in range(releases):
            for variant in VARIANTS:
                one = record(r, v, variant)
                store.put(pending_key(one), encode(one.to_dict()))
                written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("prepare", "run"))
    parser.add_argument("dest", type=Path)
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--releases", type=int, default=10)
    parser.add_argument("--extra", action="store_true", help="prepare: only the extra release's record")
    parser.add_argument("--extra-release", action="store_true", help="run: list the extra release")
    parser.add_argument("--state", action="store_true", help="prepare: then finish (state and pages)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.action == "prepare":
        count = prepare(args.dest, args.repos, args.releases, args.extra)
        if args.state:
            mirror(listings(args.repos, args.releases, False), FolderDestination(args.dest), MirrorOptions())
        print(json.dumps({"records": count, "seconds": round(time.perf_counter() - started, 3)}))
        return
    result = mirror(listings(args.repos, args.releases, args.extra_release), FolderDestination(args.dest),
                    MirrorOptions())
    if result.count("refused") or result.count("added"):
        sys.exit(f"mirror_bench: unexpected result {result.to_dict()['counts']}")
    print(json.dumps({"seconds": round(time.perf_counter() - started, 3),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "pages_written": result.pages_written, "skipped": result.count("skipped")}))


if __name__ == "__main__":
    main()
