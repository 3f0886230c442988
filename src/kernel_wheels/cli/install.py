"""``kernel-wheels install``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .common import stderr

EPILOG = """\
examples:
  kernel-wheels install img2gray --index-url http://pypi.internal:8080/simple/
  kernel-wheels install 'img2gray>=1.1,<2' --index-url https://devpi.internal/team/prod/+simple/
  kernel-wheels install img2gray==1.1.2 --index-url http://127.0.0.1:8000/simple --dry-run
  kernel-wheels install img2gray --index-url http://HOST/simple --python .venv/bin/python --installer uv

It reads the target Python's environment (Python, OS, CPU, torch, CUDA/ROCm/XPU version,
C++ ABI) by running a small probe in it, lists the project's files on the index, picks
what the Hub's kernel loader would pick (same torch major.minor; CUDA of the same major
and not newer, nearest first; stable-ABI builds for torch at or above their version;
then the backend's Python-only build; torch-universal last), says why, downloads that
exact file (its sha256 checked against the index's) and installs it with torch pinned
to the installed version. The index's credentials (the URL's user part) go only to the
index's own origin, and reach pip/uv through their environment, never their argv.
When nothing fits it lists every file with the reason it was rejected and exits 1. The
target Python defaults to the activated virtual environment's, else the one running
kernel-wheels.
"""


def register(commands: Any) -> argparse.ArgumentParser:
    ins: argparse.ArgumentParser = commands.add_parser(
        "install", help="install the one wheel of a kernel that fits this torch, never changing torch",
        description="Choose the kernel wheel that fits a Python environment, as the Hub's "
                    "loader would, and install it with pip or uv with torch pinned.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    ins.add_argument("requirement", metavar="NAME[SPEC]",
                     help="img2gray, img2gray==1.1.2 or 'img2gray>=1.1,<2'")
    ins.add_argument("--index-url", required=True,
                     help="the index's Simple API: its root /simple/ or a target index")
    ins.add_argument("--python", type=Path, help="the Python to install into")
    ins.add_argument("--installer", choices=["pip", "uv"], default="pip",
                     help="what installs the chosen file into the target Python (default: pip)")
    ins.add_argument("--dry-run", action="store_true", help="choose and explain, install nothing")
    ins.add_argument("--json", action="store_true", help="print the decision as JSON on stdout")
    ins.add_argument("--timeout", type=float, metavar="SECONDS",
                     help="connect timeout, and the window in which each transfer must move "
                          "64 KiB/s (default: $KERNEL_WHEELS_TIMEOUT or 60)")
    return ins


def run(args: argparse.Namespace) -> int:
    from ..distribution.install import install
    from ..distribution.transport import index_timeout
    from ..errors import NoMatchingWheelError

    result = install(args.requirement, args.index_url, python=args.python,
                     installer=args.installer, dry_run=args.dry_run, progress=stderr,
                     timeout=index_timeout(args.timeout))
    choice = result.choice
    if args.json:
        print(json.dumps({**choice.to_dict(), "command": list(result.command),
                          "index_env": list(result.index_env),
                          "installed": result.installed}, indent=2))
    environment = choice.environment
    if choice.chosen is None:
        for decision in choice.decisions:
            stderr(f"  rejected {decision.file.filename}: {decision.rejected}")
        raise NoMatchingWheelError(
            f"no wheel of {choice.project} fits {environment.describe()}: "
            f"{len(choice.decisions)} file(s) on the index, each rejected above")
    if not args.json:
        print(f"chose {choice.chosen.file.filename}")
        for line in choice.why:
            print(f"  why: {line}")
        for decision in choice.decisions[1:]:
            if decision.rejected is not None:
                print(f"  rejected {decision.file.filename}: {decision.rejected}")
    if result.installed:
        stderr(f"installed {choice.chosen.file.filename}; torch {environment.torch_version} "
               "unchanged")
    else:
        stderr("dry run: would run " + " ".join((*result.index_env, *result.command)))
    return 0
