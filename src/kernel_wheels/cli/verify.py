"""``kernel-wheels verify``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .common import add_policy, policy

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


def register(commands: Any) -> argparse.ArgumentParser:
    vf: argparse.ArgumentParser = commands.add_parser(
        "verify", help="verify the provenance of wheels, a site, or the kernels installed in a Python",
        description="Verify, offline, the Sigstore signature and signed digests of kernel wheels "
                    "(files, or every wheel under a folder such as a static index site) or of "
                    "the kernels installed in a Python, under a provenance policy.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    vf.add_argument("paths", nargs="*", type=Path, metavar="WHEEL_OR_DIR",
                    help="wheel files, or folders searched for *.whl (a site, an output folder)")
    vf.add_argument("--python", type=Path,
                    help="verify the kernels installed in this Python instead")
    vf.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    add_policy(vf)
    return vf


def _wheels(paths: list[Path]) -> list[Path]:
    from ..errors import UsageError

    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob("*.whl"))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    if not found:
        raise UsageError(f"no .whl files in {', '.join(map(str, paths))}")
    return found


def run(args: argparse.Namespace) -> int:
    from ..errors import UsageError

    if bool(args.paths) == (args.python is not None):
        raise UsageError("give wheels or folders, or --python PY (not both)")
    chosen = policy(args)
    rows: list[dict[str, Any]] = []
    if args.python is not None:
        from ..install.provenance import verify_installed

        for item in verify_installed(args.python, chosen):
            rows.append({"target": item.kernel.distribution, "path": str(item.kernel.path),
                         "passed": not item.failures, "failures": list(item.failures),
                         "provenance": item.verification.to_dict() if item.verification else None})
    else:
        from ..checks.provenance import verify_wheel
        from ..checks.report import Status

        for wheel in _wheels(args.paths):
            findings, now = verify_wheel(wheel, chosen)
            failures = [f.message for f in findings if f.status is Status.FAIL]
            rows.append({"target": wheel.name, "path": str(wheel), "passed": not failures,
                         "failures": failures, "provenance": now.to_dict() if now else None})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            if not row["passed"]:
                print(f"FAIL {row['target']}: {row['failures'][0]}")
            elif row["provenance"] and row["provenance"]["signed"]:
                found = row["provenance"]
                print(f"PASS {row['target']}: signed by {found['identity']} ({found['issuer']}), "
                      f"transparency log entry {found['log_index']}")
            else:
                print(f"PASS {row['target']}: unsigned (no metadata.json.sigstore)")
    failed = sum(not row["passed"] for row in rows)
    args.progress(f"{len(rows) - failed} of {len(rows)} verified")
    return 1 if failed else 0
