#!/usr/bin/env python3
"""The ELF reader against mutated shared objects, measured.

    .venv/bin/python -m benchmarks.security.elf_fuzz            # 5,000 mutations
    .venv/bin/python -m benchmarks.security.elf_fuzz --quick    # 500
    KW_PREBUILT=DIR ... elf_fuzz.py   # the sample kernel's build (`kernel-wheels build -o DIR`);
                                      # without it the sample kernel is built first (minutes)

Mutates two real shared objects (a tiny gcc-built library and the sample kernel's
extension) as tests/test_elf_hostile.py does, with a seeded random generator instead of
hypothesis, half the mutations each: every mutant is read by the ELF reader in this
process, packed into a wheel, judged by ``kernel-wheels check --json`` and, if accepted,
loaded by the system loader (``ctypes.CDLL`` in a forked child). Prints the cases, how
many check accepted, the refusals by reason, how many loaded, the accepted ones that did
not load (must be 0), the reader's exceptions other than ElfError (must be 0) and the
time; exits 1 if a must-be-0 is not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.support.elf_mutations import (  # the tests' mutation engine, shared
    VARIANT,
    Base,
    Campaign,
    RandomChooser,
    Verdict,
    base_of,
    build_tiny_library,
    mutate,
    reason_class,
)

ROOT = Path(__file__).resolve().parents[2]


def _extension(scratch: Path) -> Path:
    """The sample kernel's extension: from KW_PREBUILT, else built here."""
    prebuilt = os.environ.get("KW_PREBUILT")
    if prebuilt:
        return next((Path(prebuilt) / "build" / VARIANT).glob("*.abi3.so"))
    out = scratch / "sample-build"
    subprocess.run([sys.executable, "-m", "kernel_wheels", "build", str(ROOT / "sample-kernel"), "-o",
                    str(out)], check=True, capture_output=True)
    return next((out / "build" / VARIANT).glob("*.abi3.so"))


def _refusals(campaign: Campaign, verdict: Verdict) -> Counter[str]:
    """Why each refused case was refused: the ELF reader's reason, or the first failing
    check's when the reader accepted the file."""
    reasons: Counter[str] = Counter()
    for case in campaign.cases:
        report = verdict.reports.get(case.wheel)
        if report is not None and report["passed"]:
            continue
        if case.error is not None:
            reasons[f"elf: {reason_class(case.error)}"] += 1
        elif report is not None:
            failure = next(f for f in report["findings"] if f["status"] == "fail")
            reasons[f"check [{failure['check']}]"] += 1
        else:
            reasons["no report"] += 1
    return reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--count", type=int, default=5000, help="mutations in all (default 5,000)")
    parser.add_argument("--quick", action="store_true", help="500 mutations")
    parser.add_argument("--seed", type=int, default=0, help="the random generator's seed (default 0)")
    args = parser.parse_args()
    count = 500 if args.quick else args.count
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kw-elf-fuzz-") as scratch_name:
        scratch = Path(scratch_name)
        tiny = build_tiny_library(_mkdir(scratch / "tiny"))
        bases: list[Base] = [base_of("tiny library", tiny, _mkdir(scratch / "tiny-wheel"), needs_torch=False),
                             base_of("sample extension", _extension(scratch), _mkdir(scratch / "ext-wheel"),
                                     needs_torch=True)]
        ready = time.monotonic()
        totals: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        unloadable: list[tuple[str, tuple[str, str]]] = []
        exceptions: list[tuple[str, str]] = []
        tracebacks = 0
        timings = Counter[str]()
        for number, base in enumerate(bases):
            share = count // len(bases) + (1 if number < count % len(bases) else 0)
            campaign = Campaign(base, _mkdir(scratch / f"campaign-{number}"))
            chooser = RandomChooser(args.seed * len(bases) + number)
            generated = time.monotonic()
            for _ in range(share):
                campaign.add(mutate(base.frame, chooser), catch_all=True)
            timings["read and pack"] += time.monotonic() - generated
            verdict = campaign.judge()
            timings["check"] += verdict.check_seconds
            timings["load"] += verdict.load_seconds
            tracebacks += "Traceback" in verdict.proc.stderr
            totals["cases"] += len(campaign.cases)
            totals["accepted"] += len(verdict.accepted)
            totals["loaded"] += sum(v[0] == "loaded" for v in verdict.loads.values())
            totals["refused by the ELF reader"] += sum(c.error is not None for c in campaign.cases)
            reasons += _refusals(campaign, verdict)
            unloadable += [(f"{base.name}: {d}", v) for d, v in verdict.unloadable()]
            exceptions += [(f"{base.name}: {d}", e) for d, e in campaign.exceptions]
            unreported = verdict.unreported(campaign.cases)
            totals["ElfError not reported by check"] += len(unreported)
    _print(count, args.seed, totals, reasons, unloadable, exceptions, tracebacks, timings,
           ready - started, time.monotonic() - started)
    bad = unloadable or exceptions or tracebacks or totals["ElfError not reported by check"]
    return 1 if bad else 0


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _print(count: int, seed: int, totals: Counter[str], reasons: Counter[str],
           unloadable: list[tuple[str, tuple[str, str]]], exceptions: list[tuple[str, str]],
           tracebacks: int, timings: Counter[str], setup: float, total: float) -> None:
    refused = totals["cases"] - totals["accepted"]
    print(f"ELF fuzzing: {count} mutations requested, seed {seed}")
    print(f"  cases                                  {totals['cases']}")
    print(f"  accepted by check                      {totals['accepted']}")
    print(f"  refused                                {refused} "
          f"({totals['refused by the ELF reader']} by the ELF reader)")
    for reason, number in reasons.most_common():
        print(f"    {number:6d}  {reason}")
    print(f"  loaded by the system loader            {totals['loaded']}")
    print(f"  accepted but not loadable (must be 0)  {len(unloadable)}")
    for description, (status, detail) in unloadable[:20]:
        print(f"    {description}: {status} {detail[-120:]}")
    print(f"  exceptions other than ElfError (0)     {len(exceptions)}")
    for description, error in exceptions[:20]:
        print(f"    {description}: {error}")
    print(f"  check runs with a traceback (0)        {tracebacks}")
    print(f"  ElfErrors check did not report (0)     {totals['ElfError not reported by check']}")
    stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
    print(f"  time                                   {total:.1f} s (setup {setup:.1f} s; {stages})")


if __name__ == "__main__":
    sys.exit(main())
