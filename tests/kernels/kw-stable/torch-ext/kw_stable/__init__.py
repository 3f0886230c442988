"""kw-stable: multiply a float32 tensor by a factor (default from data/defaults.json)."""

import json
from pathlib import Path

import torch

from ._ops import ops
from .kw_stable import NAME as MODULE_FILE

DEFAULT_FACTOR = json.loads((Path(__file__).parent / "data" / "defaults.json").read_text())["factor"]


def scale(x: torch.Tensor, factor: float = DEFAULT_FACTOR) -> torch.Tensor:
    out = torch.empty_like(x)
    ops.scale(out, x, factor)
    return out


__all__ = ["DEFAULT_FACTOR", "MODULE_FILE", "scale"]
