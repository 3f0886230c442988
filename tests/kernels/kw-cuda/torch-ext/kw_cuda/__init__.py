"""kw-cuda: fill a float32 tensor (on CUDA: through CUTLASS's half type)."""

import torch

from ._ops import ops


def fill_half_rounded(out: torch.Tensor, value: float) -> torch.Tensor:
    ops.fill_half_rounded(out, value)
    return out


__all__ = ["fill_half_rounded"]
