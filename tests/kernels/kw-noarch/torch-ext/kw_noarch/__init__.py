"""kw-noarch: halve a tensor through a torch op registered in this build's namespace."""

import torch

from ._ops import add_op_namespace_prefix, ops
from .kw_noarch import half_of


@torch.library.custom_op(add_op_namespace_prefix("halve"), mutates_args=())
def _halve(x: torch.Tensor) -> torch.Tensor:
    return half_of(x)


def halve(x: torch.Tensor) -> torch.Tensor:
    return ops.halve(x)


__all__ = ["halve"]
