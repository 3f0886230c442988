"""``kernel-wheels verify``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import Commands, add_command, add_policy, policy

EPILOG = """\
examples:
  kernel-wheels verify dist/img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl
  kernel-wheels verify site/ --require-signature          # every wheel of a static index site
  kernel-wheels verify --python .venv/bin/python --json   # the kernels installed there
  kernel-wheels verify dist/ --trusted-root root.json --signer ISSUER=IDENTITY

Offline: each variant's Sigstore bundle over its metadata.json, the signed digests
against every file, and the record the wheel carries (docs/provenance.md). Exit status:
0 everything passed, 1 something did not, 2 a usage error.
"""


def register(commands: Commands) -> argparse.ArgumentParser:
    vf = add_command(
        commands, "verify",
        help="verify the provenance of wheels, a site, or the kernels installed in a Python",
        description="Verify, offline, the Sigstore signature and signed digests of kernel wheels "
                    "(files, or every wheel under a folder such as a static index site) or of "
                    "the kernels installed in a Python, under a provenance policy.", epilog=EPILOG)
    vf.add_argument("paths", nargs="*", type=Path, metavar="WHEEL_OR_DIR",
                    help="wheel files, or folders searched for *.whl (a site, an output folder)")
    vf.add_argument("--python", type=Path,
                    help="verify the kernels installed in this Python instead")
    vf.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    add_policy(vf)
    return vf


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError

    if bool(args.paths) == (args.python is not None):
        raise UsageError("give wheels or folders, or --python PY (not both)")
    chosen = policy(args)
    if args.python is not None:
        from ..install.provenance import verify_installed

        results = verify_installed(args.python, chosen)
    else:
        from ..checks.paths import wheels_under
        from ..checks.provenance import verify_wheels

        results = verify_wheels(wheels_under(args.paths), chosen)
    if args.json:
        print(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        for result in results:
            found = result.verification
            if not result.passed:
                print(f"FAIL {result.target}: {result.failures[0]}")
            elif found is not None and found.signed:
                print(f"PASS {result.target}: signed by {found.identity} ({found.issuer}), "
                      f"transparency log entry {found.log_index}")
            else:
                print(f"PASS {result.target}: unsigned (no metadata.json.sigstore)")
    failed = sum(not result.passed for result in results)
    args.progress(f"{len(results) - failed} of {len(results)} verified")
    return 1 if failed else 0
