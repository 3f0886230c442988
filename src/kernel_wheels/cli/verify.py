"""``kernel-wheels verify``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..terminal import shown
from .common import Commands, add_command, add_policy, out, policy

if TYPE_CHECKING:
    from ..checks.proof import ProofResult

EPILOG = """\
examples:
  kernel-wheels verify dist/img2gray-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl
  kernel-wheels verify site/ --require-signature          # every wheel of a static index site
  kernel-wheels verify --python .venv/bin/python --json   # the kernels installed there
  kernel-wheels verify dist/ --trusted-root root.json --signer ISSUER=IDENTITY

Offline, the verdict check gives (docs/provenance.md), said as what it proves, one word
per wheel: VERIFIED (signed by an accepted signer; every file signed or derived again),
UNSIGNED (its checks pass; no signature covers it), NOT VERIFIED (signed, but part of it
is not proved, such as a wheel another kernel-wheels release made), FAILED. Exit status:
0 nothing failed, 1 something failed, 2 a usage error.
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
    from ..checks.proof import Proof, count

    if args.python is not None:
        from ..install.audit import verify_installed

        results = verify_installed(args.python, chosen)
    else:
        from ..checks.paths import wheels_under
        from ..checks.proof import verify_wheels

        results = verify_wheels(wheels_under(args.paths), chosen)
    if args.json:
        out(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        for result in results:
            out(_line(result, installed=args.python is not None))
    counted = count(results)
    args.progress(", ".join(f"{counted[proof]} {proof.value}" for proof in Proof))
    return 1 if counted[Proof.FAILED] else 0


def _line(result: ProofResult, installed: bool = False) -> str:
    """One line per wheel or installed kernel: what it proves, in the word it is counted
    by (a failure's further reasons on lines of their own, indented)."""
    from ..checks.proof import Proof

    found = result.verification
    if result.proof is Proof.FAILED:
        return "\n    ".join([f"FAILED {result.target}: {shown(result.failures[0], 4000)}",
                               *(shown(failure, 4000) for failure in result.failures[1:])])
    intact = "every installed file is as its RECORD lists it" if installed else ""
    if result.proof is Proof.VERIFIED and found is not None:
        proved = (f"the variant folder is as signed, the code kernel-wheels wrote derived again, "
                  f"{intact}") if installed else "every file is signed or derived again"
        return (f"VERIFIED {result.target}: signed by {shown(str(found.identity))} "
                f"({shown(str(found.issuer))}), transparency log entry {found.log_index}; {proved}")
    if result.proof is Proof.UNSIGNED:
        return (f"UNSIGNED {result.target}: no signature covers it (no metadata.json.sigstore); "
                f"{intact or 'its checks pass'}")
    why = result.unproved[0] if result.unproved else "its provenance is not known"
    return f"NOT VERIFIED {result.target}: {shown(why, 4000)}"
