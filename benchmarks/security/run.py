#!/usr/bin/env python3
"""The measured figures of docs/security.md, in one run (issue #18, deliverables 3, 6, 9).

    .venv/bin/python -m benchmarks.security.run            # full: ~5 minutes
    .venv/bin/python -m benchmarks.security.run --quick    # ~2 minutes

Runs, one after the other, each with bounded loads on 127.0.0.1 only:

1. hub_answers.py: a hostile Hub's generated answers against the converter (at least 5,000
   answers; 0 tracebacks, 0 writes outside, 0 leaked tokens);
2. serve_abuse.py: `kernel-wheels serve` under abuse (p50/p99 of cached files and pages
   alone, while 50 clients wait on a stalled conversion, with 1,000 idle and half-sent
   connections open, while 20 clients guess passwords; the user-name timing ratio;
   upstream attempts for 50 waiters; when idle connections are closed);
3. elf_fuzz.py: mutated shared objects against `check` and the system loader (at least
   2,000 cases; 0 accepted-but-unloadable, 0 exceptions other than ElfError).

Each part prints its own table; the exit status is 1 if any part failed its rules.
KW_PREBUILT=DIR (a `kernel-wheels build -o DIR` of the sample kernel) saves the ELF part
a build.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs of every part")
    args = parser.parse_args()
    parts = [("hub answers", "hub_answers", []), ("serve under abuse", "serve_abuse", []),
             ("ELF fuzzing", "elf_fuzz", ["-n", "2000"])]
    failed = []
    for title, script, extra in parts:
        print(f"\n=== {title} ({script}) ===", flush=True)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", f"benchmarks.security.{script}",
                               *(["--quick"] if args.quick else extra)], cwd=ROOT)
        print(f"=== {title}: exit {proc.returncode} in {time.monotonic() - started:.0f} s", flush=True)
        if proc.returncode != 0:
            failed.append(title)
    print(f"\nsecurity figures: {'all parts held' if not failed else 'FAILED: ' + ', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
