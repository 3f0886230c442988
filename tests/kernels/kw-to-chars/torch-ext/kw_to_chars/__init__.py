"""kw-to-chars: the shortest text that reads back as the same double (std::to_chars)."""

import torch

from ._ops import ops


def shortest_text(value: float) -> str:
    out = torch.zeros(32, dtype=torch.uint8)
    length = ops.shortest_text(out, torch.tensor([value], dtype=torch.float64))
    return bytes(out[:length].tolist()).decode("ascii")


__all__ = ["shortest_text"]
