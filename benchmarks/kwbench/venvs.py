"""The peers' own virtual environments, built once under .work/ with ``python -m venv``
and pip (which reads this machine's index configuration), pinned, and recorded with
``pip freeze`` in the results: the old ``kernels to-wheel`` (``old_tool``) and
``simple503`` (the index rows' peer). ``auditwheel``, pip and uv are kernel-wheels' own
development tools (.venv) and need no venv of their own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .config import WORK

_MARKER = ".kwbench-complete"


def ensure_venv(name: str, requirements: Sequence[str], progress: Callable[[str], None]) -> Path:
    """The ``bin`` folder of ``.work/<name>`` with ``requirements`` installed, created
    when missing or left half-made."""
    venv = WORK / name
    marker = venv / _MARKER
    if marker.exists():
        return venv / "bin"
    progress(f"creating a venv for {' '.join(requirements)} in {venv}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", *requirements],
                   check=True, capture_output=True)
    marker.write_text(subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"],
                                     check=True, capture_output=True, text=True).stdout)
    return venv / "bin"


def frozen(name: str) -> list[str]:
    """``.work/<name>`` as ``pip freeze`` saw it when it was made (empty: not made)."""
    marker = WORK / name / _MARKER
    return marker.read_text().splitlines() if marker.exists() else []
