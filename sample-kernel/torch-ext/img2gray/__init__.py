"""img2gray: RGB uint8 image (H, W, 3) -> grayscale uint8 image (H, W).

gray = 0.21 R + 0.72 G + 0.07 B, computed in float32 and truncated.
"""

import torch

from ._ops import ops

__all__ = ["img2gray"]


def img2gray(image: torch.Tensor) -> torch.Tensor:
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"img2gray: expected a torch.Tensor, got {type(image).__name__}")
    if image.dtype != torch.uint8:
        raise TypeError(f"img2gray: image must be uint8, got {image.dtype}")
    if image.dim() != 3 or image.shape[2] != 3:
        raise ValueError(f"img2gray: image must have shape (H, W, 3), got {tuple(image.shape)}")
    if not image.is_contiguous():
        raise ValueError("img2gray: image must be contiguous (call .contiguous() first)")
    output = torch.empty(image.shape[:2], dtype=torch.uint8, device=image.device)
    ops.img2gray(image, output)
    return output
