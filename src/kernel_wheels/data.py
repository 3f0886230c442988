"""Access to the tables shipped in ``kernel_wheels/data`` (policy as data, not code)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> Any:
    """Parse ``data/<name>.json``. Cached: the files are immutable package data."""
    text = resources.files("kernel_wheels").joinpath("data", f"{name}.json").read_text("utf-8")
    return json.loads(text)
