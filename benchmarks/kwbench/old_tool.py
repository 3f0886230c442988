"""The baseline: the removed ``kernels to-wheel`` (PyPI kernels 0.11.3) in its own venv.

It needs ``huggingface_hub<2`` and does not declare ``wheel``; both are pinned here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .config import OLD_TOOL_REQUIREMENTS
from .venvs import ensure_venv, frozen

VENV = "old-kernels-venv"


def ensure_old_tool(progress: Callable[[str], None]) -> Path:
    """The ``kernels`` executable of the old tool's venv, created when missing."""
    return ensure_venv(VENV, OLD_TOOL_REQUIREMENTS, progress) / "kernels"


def versions() -> str:
    """The old tool's venv as ``pip freeze`` saw it (recorded in the results)."""
    return "\n".join(frozen(VENV))
