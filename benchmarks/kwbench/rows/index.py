"""``kernel-wheels index`` (issue #8): a static index over many wheels from scratch, and
adding one wheel to an existing index.

"Adding one" runs ``index NEW.whl -o SITE`` on a copy of the finished index (the command
adds the wheels it is given to what the site holds), NEW being a new release of one of
the projects. Both runs are verified: every project has its page, and the new wheel is
on its project's page. Until the command exists the rows say "n/a (command missing)".
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..bench import Bench, command_exists
from ..config import KERNEL_WHEELS, WORK
from ..index_wheels import generate
from ..measure import Job, base_env, run_interleaved
from ..report import Row, Target

FROM_SCRATCH_S = 10.0  # issue #10, for 10,000 wheels
ADD_ONE_S = 1.0


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
    return [scratch_row, add_row]
