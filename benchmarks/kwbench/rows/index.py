"""``kernel-wheels index`` (issue #8): a static index over many wheels from scratch, and
adding one wheel to an existing index; and the same from scratch against its peer,
``simple503 -c`` (issue #42), on the first 1,000 and 5,000 of those wheels.

"Adding one" runs ``index NEW.whl -o SITE`` on a copy of the finished index (the command
adds the wheels it is given to what the site holds), NEW being a new release of one of
the projects. Both runs are verified: every project has its page, and the new wheel is
on its project's page. Until the command exists the rows say "n/a (command missing)".

The peer: ``simple503 -c WHEELS OUT`` (simple503 0.4.0, its own venv) copies every wheel
into OUT, hashes it, extracts its METADATA (PEP 658) and writes a PEP 503 page per
project and the root page. kernel-wheels index does as much (it links or copies each
wheel, hashes it, writes its METADATA file and the pages, PEP 503 and 691) and more: it
checks every new wheel as ``check`` does and writes a page per build target too. Both
start from an empty output folder; their output is verified after every run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..bench import Bench, command_exists
from ..config import KERNEL_WHEELS, KERNELS, SIMPLE503_REQUIREMENTS, WORK
from ..index_wheels import generate
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target
from ..venvs import ensure_venv

FROM_SCRATCH_S = 10.0  # issue #10, for 10,000 wheels
ADD_ONE_S = 1.0
VS_PEER = 1.5  # issue #42: at most 1.5x simple503 -c at 5,000 wheels
LINEAR = 1.1  # time per wheel at the largest count over the smallest (as to-wheel's scaling)
SIMPLE503_VENV = "simple503-venv"


def _project(wheel: Path) -> str:
    return wheel.name.split("-")[0].replace("_", "-")


def _expect_site(site: Path, wheels: list[Path]) -> None:
    """Every project of ``wheels`` has a page in SITE/simple/ that names its wheels
    (only the last one of each project is looked for, to keep this quick)."""
    last = {_project(w): w.name for w in sorted(wheels)}
    for project, name in last.items():
        page = site / "simple" / project / "index.html"
        if not page.is_file() or name not in page.read_text():
            raise RuntimeError(f"kernel-wheels index: {name} is not on {page}")


def _rows(count: int) -> tuple[Row, Row]:
    scratch = Row("index/scratch", f"index {count:,} wheels from scratch",
                  f"kernel-wheels index over {count:,} small valid kernel wheels into an empty site",
                  "s", target=Target("value_below", FROM_SCRATCH_S))
    add = Row("index/add-one", f"index: add 1 wheel to {count:,}",
              f"kernel-wheels index NEW.whl -o SITE: one new release's wheel added to the "
              f"finished {count:,}-wheel site",
              "s", target=Target("value_below", ADD_ONE_S))
    return scratch, add


def _subset(wheels: list[Path], count: int) -> Path:
    """A folder of the first ``count`` wheels (whole projects: they are sorted by name),
    hard links made once."""
    folder = KERNELS / "index-subsets" / str(count)
    done = folder.with_name(f"{count}.done")
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for wheel in wheels[:count]:
            os.link(wheel, folder / wheel.name)
        done.touch()
    return folder


def _expect_simple503(out: Path, wheels: list[Path]) -> None:
    """simple503's page of each project names its last wheel."""
    last = {_project(w): w.name for w in sorted(wheels)}
    for project, name in last.items():
        page = out / project / "index.html"
        if not page.is_file() or name not in page.read_text():
            raise RuntimeError(f"simple503: {name} is not on {page}")


def _vs_peer(bench: Bench, all_wheels: list[Path]) -> list[Row]:
    """index and simple503 -c from scratch over the first N wheels, interleaved."""
    peer = ensure_venv(SIMPLE503_VENV, SIMPLE503_REQUIREMENTS, bench.progress) / "simple503"
    env = base_env()
    pairs: dict[int, tuple[Job, Job]] = {}
    for count in bench.sizes.index_vs_peer:
        count = min(count, len(all_wheels))
        chosen = all_wheels[:count]
        subset = _subset(all_wheels, count)
        site, out = WORK / f"site-{count}", WORK / f"simple503-{count}"
        ours = Job(f"index-{count}", [str(KERNEL_WHEELS), "index", str(subset), "-o", str(site)], env,
                   prepare=lambda site=site: shutil.rmtree(site, ignore_errors=True),
                   verify=lambda site=site, chosen=chosen: _expect_site(site, chosen))
        theirs = Job(f"simple503-{count}", [str(peer), "-c", str(subset), str(out)], env,
                     prepare=lambda out=out: shutil.rmtree(out, ignore_errors=True),
                     verify=lambda out=out, chosen=chosen: _expect_simple503(out, chosen))
        pairs[count] = (ours, theirs)
    bench.progress(f"  index vs simple503 -c, {' and '.join(f'{c:,}' for c in pairs)} wheels")
    run_interleaved([job for pair in pairs.values() for job in pair], bench.sizes.runs, bench.progress)
    rows = []
    for count, (ours, theirs) in pairs.items():
        rows.append(Row(
            f"index/vs-simple503/{count}", f"index {count:,} wheels vs simple503 -c",
            f"kernel-wheels index over {count:,} small kernel wheels into an empty site (every "
            "wheel checked, pages per build target) vs simple503 -c over the same folder into "
            "an empty one (copy, sha256, METADATA, PEP 503 pages)",
            "s", ours.median_s, theirs.median_s,
            Target("ratio_max", VS_PEER) if count == max(pairs) else None,
            samples={"ours": [s.seconds for s in ours.samples],
                     "baseline": [s.seconds for s in theirs.samples]}))
    if len(pairs) >= 2:
        small, large = min(pairs), max(pairs)
        per_wheel = {c: pairs[c][0].median_s / c for c in (small, large)}
        peer_growth = (pairs[large][1].median_s / large) / (pairs[small][1].median_s / small)
        rows.append(Row(
            "index/linear", f"index time per wheel, {large:,} vs {small:,} wheels",
            f"kernel-wheels index's median from scratch divided by the wheel count, at {large:,} vs "
            f"at {small:,} wheels (constant or falling = linear growth)",
            "s/wheel", per_wheel[large], per_wheel[small], Target("ratio_max", LINEAR),
            note=(f"per wheel: {per_wheel[small] * 1000:.2f} ms at {small:,}, "
                  f"{per_wheel[large] * 1000:.2f} ms at {large:,}; simple503's per-wheel time "
                  f"grows {peer_growth:.2f}x over the same counts")))
    return rows


def run(bench: Bench) -> list[Row]:
    wanted = bench.sizes.index_wheels
    if not command_exists("index"):
        rows = _rows(wanted)
        for row in rows:
            row.note = "n/a (command missing)"
        return list(rows)
    bench.progress(f"  index: generating about {wanted:,} wheels (once, cached)")
    wheels, extra = generate(wanted)
    all_wheels = sorted(wheels.glob("*.whl"))
    peer_rows = _vs_peer(bench, all_wheels)
    new_wheel = next(extra.glob("*.whl"))
    count = len(all_wheels)
    scratch_row, add_row = _rows(count)
    site, base_site, add_site = WORK / "site", WORK / "site-base", WORK / "site-add"
    env = base_env()
    scratch = Job("index-scratch", [str(KERNEL_WHEELS), "index", str(wheels), "-o", str(site)], env,
                  prepare=lambda: shutil.rmtree(site, ignore_errors=True),
                  verify=lambda: _expect_site(site, all_wheels))
    bench.progress(f"  index {count:,} wheels from scratch")
    run_interleaved([scratch], bench.sizes.runs, bench.progress)

    shutil.rmtree(base_site, ignore_errors=True)
    shutil.copytree(site, base_site, symlinks=True)

    def copy_base() -> None:
        shutil.rmtree(add_site, ignore_errors=True)
        shutil.copytree(base_site, add_site, symlinks=True)

    add = Job("index-add-one", [str(KERNEL_WHEELS), "index", str(new_wheel), "-o", str(add_site)],
              env, prepare=copy_base, verify=lambda: _expect_site(add_site, [*all_wheels, new_wheel]))
    bench.progress("  index: add one wheel")
    run_interleaved([add], bench.sizes.runs, bench.progress)
    scratch_row.ours = scratch.median_s
    scratch_row.samples = {"ours": [s.seconds for s in scratch.samples]}
    add_row.ours = add.median_s
    add_row.samples = {"ours": [s.seconds for s in add.samples]}
    return [*peer_rows, scratch_row, add_row]
