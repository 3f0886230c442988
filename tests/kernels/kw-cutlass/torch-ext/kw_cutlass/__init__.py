"""kw-cutlass: the CUTLASS version its build compiled against."""

import torch

from ._ops import ops


def cutlass_version() -> int:
    return int(ops.cutlass_version(torch.zeros(1)))


def archive_mark() -> int:
    return int(ops.archive_mark(torch.zeros(1)))


__all__ = ["archive_mark", "cutlass_version"]
