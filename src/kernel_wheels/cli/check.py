"""``kernel-wheels check``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..terminal import shown
from .common import Commands, add_command, add_policy, out, policy, positive_int


def register(commands: Commands) -> argparse.ArgumentParser:
    ck = add_command(
        commands, "check", help="check wheels against everything their names claim",
        description="Check RECORD hashes, METADATA and WHEEL, manylinux symbol versions "
                    "(torch's libraries excluded), architecture, RPATH, PyInit, the limited "
                    "API, metadata.json digests, and provenance: each variant's Sigstore "
                    "bundle re-verified offline under the policy options (docs/provenance.md). "
                    "Exit status: 0 every wheel passed; "
                    "1 a wheel failed a check; 2 a usage error (bad option, a path that does "
                    "not exist, a folder without wheels).",
        epilog="examples:\n  kernel-wheels check dist/*.whl\n  kernel-wheels check dist/   "
               "# every wheel in the folder\n  kernel-wheels check --json "
               "img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl\n")
    ck.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL_OR_DIR",
                    help="wheel files, or folders whose *.whl files are checked")
    ck.add_argument("--json", action="store_true",
                    help="print a JSON report on stdout (a JSON error object on a usage error)")
    ck.add_argument("-j", "--jobs", type=positive_int, default=0,
                    help="wheels checked at once, in worker processes (default: one per CPU)")
    add_policy(ck)
    return ck


def run(args: argparse.Namespace) -> int:
    from ..checks import Status, judge_wheels
    from ..checks.paths import wheels_in

    reports = judge_wheels(wheels_in(args.wheels), jobs=args.jobs, policy=policy(args))
    if args.json:
        out(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for report in reports:
            verdict = "PASS" if report.passed else "FAIL"
            out(f"{verdict} {report.wheel}")
            for finding in report.findings:
                if finding.status is Status.PASS and not args.verbose:
                    continue
                # One line per finding, whatever a wheel's record holds (a line break too).
                out(f"  {finding.status.value}: [{finding.check}] {shown(finding.message, 4000)}")
    failed = sum(not r.passed for r in reports)
    args.progress(f"{len(reports) - failed} of {len(reports)} wheels passed")
    return 1 if failed else 0
