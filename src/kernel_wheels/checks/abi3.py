"""Python's limited API: only stable-ABI symbols of the tagged Python version.

Uses PyPI's ``abi3audit`` (no public Python API, so it runs as a subprocess). It
does not look at NEEDED; libpython/libtorch_python are refused in checks.elf.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .report import Finding, Status


def check_abi3(wheel: Path) -> list[Finding]:
    with tempfile.TemporaryDirectory(prefix="kernel-wheels-abi3-") as scratch:
        report = Path(scratch) / "report.json"
        # Its cache and state go to a scratch folder: checks must not write elsewhere.
        env = {**os.environ, "XDG_CACHE_HOME": scratch, "XDG_STATE_HOME": scratch}
        proc = subprocess.run(
            [sys.executable, "-m", "abi3audit", "-R", "-o", str(report), "-S", str(wheel)],
            capture_output=True, text=True, env=env)
        try:
            result = json.loads(report.read_text())
        except (OSError, json.JSONDecodeError):
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:]) or "no output"
            return [Finding("abi3", Status.FAIL, f"abi3audit could not run: {tail}")]
    findings = []
    for spec in result.get("specs", {}).values():
        wheel_report = spec.get("wheel") or []
        for so in wheel_report:
            name = so.get("name", "?")
            audit = so.get("result") or {}
            baseline = audit.get("baseline")
            computed = audit.get("computed")
            for violation in audit.get("non_abi3_symbols", []):
                findings.append(Finding("abi3", Status.FAIL,
                                        f"{name} uses {violation}, which is not in the stable ABI"))
            if audit.get("is_abi3_baseline_compatible") is False:
                findings.append(Finding(
                    "abi3", Status.FAIL,
                    f"{name} needs the Python {computed} limited API but the wheel is tagged "
                    f"for {baseline}"))
            if not any(f.message.startswith(name) for f in findings):
                findings.append(Finding("abi3", Status.PASS,
                                        f"{name}: limited API {computed or 'baseline'} "
                                        f"<= {baseline}"))
    if proc.returncode != 0 and not any(f.status is Status.FAIL for f in findings):
        findings.append(Finding("abi3", Status.FAIL,
                                f"abi3audit failed: {(proc.stderr or proc.stdout).strip()[:300]}"))
    return findings
