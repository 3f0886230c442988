#!/usr/bin/env python3
"""A hostile Hub's answers against the converter, measured (issue #18, deliverable 3).

    .venv/bin/python -m benchmarks.security.hub_answers             # 1,500 scenarios
    .venv/bin/python -m benchmarks.security.hub_answers --quick     # 200
    .venv/bin/python -m benchmarks.security.hub_answers -n 5000

Runs the property test tests/test_security_hub_fuzz.py, which serves hypothesis-generated
answers to refs, revision, tree and file requests from a Hub of its own on 127.0.0.1 to
the real converter, and asserts per scenario: a result or one typed error line, nothing
written outside the run's folders, no temporary folder left, no token sent to another
host. Prints how many answers were given, how the scenarios ended, and the time; exits 1
if any scenario broke a rule (the test fails then) or fewer than 5,000 answers were given
in a full run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--scenarios", type=int, default=1500, help="scenarios (default 1,500)")
    parser.add_argument("--quick", action="store_true",
                        help="200 scenarios (fewer than the 5,000 answers a full run must give)")
    args = parser.parse_args()
    scenarios = 200 if args.quick else args.scenarios
    env = {**os.environ, "KW_FUZZ_EXAMPLES": str(scenarios),
           "KW_FUZZ_MIN_ANSWERS": "0" if args.quick else "5000",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s",
                           "tests/test_security_hub_fuzz.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    elapsed = time.monotonic() - started
    found = re.search(r"hostile Hub answers given: (\d+); outcomes: (\{.*\})", proc.stdout)
    print(f"hostile Hub answers: {scenarios} scenarios")
    if found:
        print(f"  answers given                          {int(found[1]):,}")
        print(f"  how the scenarios ended                {found[2]}")
    print(f"  tracebacks, writes outside, leaks (0)  {'0' if proc.returncode == 0 else 'see below'}")
    print(f"  time                                   {elapsed:.1f} s")
    if proc.returncode != 0:
        print(proc.stdout[-4000:] + proc.stderr[-2000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
