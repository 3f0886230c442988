"""The baseline: the removed ``kernels to-wheel`` (PyPI kernels 0.11.3) in its own venv.

It needs ``huggingface_hub<2`` and does not declare ``wheel``; both are pinned here.
Built once under .work/, with ``python -m venv`` and pip (pip reads this machine's
index configuration).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .config import OLD_TOOL_REQUIREMENTS, WORK

VENV = WORK / "old-kernels-venv"


def ensure_old_tool(progress: Callable[[str], None]) -> Path:
    """The ``kernels`` executable of the old tool's venv, created when missing."""
    executable = VENV / "bin" / "kernels"
    marker = VENV / ".kwbench-complete"
    if executable.exists() and marker.exists():
        return executable
    progress(f"creating the old tool's venv ({' '.join(OLD_TOOL_REQUIREMENTS)}) in {VENV}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", *OLD_TOOL_REQUIREMENTS],
                   check=True, capture_output=True)
    marker.write_text(subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "freeze"],
                                     check=True, capture_output=True, text=True).stdout)
    return executable


def versions() -> str:
    """The old tool's venv as ``pip freeze`` saw it (recorded in the results)."""
    marker = VENV / ".kwbench-complete"
    return marker.read_text() if marker.exists() else ""
