#pragma once
// Input validation shared by every backend, so that a direct call of the op
// (torch.ops.<namespace>.img2gray) fails as clearly as the Python wrapper.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

inline void img2gray_check_args(const at::Tensor& input, const at::Tensor& output) {
  TORCH_CHECK(input.scalar_type() == at::kByte,
              "img2gray: input must be uint8, got ", input.scalar_type());
  TORCH_CHECK(output.scalar_type() == at::kByte,
              "img2gray: output must be uint8, got ", output.scalar_type());
  TORCH_CHECK(input.dim() == 3 && input.size(2) == 3,
              "img2gray: input must have shape (H, W, 3), got ", input.sizes());
  TORCH_CHECK(output.dim() == 2 && output.size(0) == input.size(0) &&
                  output.size(1) == input.size(1),
              "img2gray: output must have shape (H, W) = (", input.size(0), ", ",
              input.size(1), "), got ", output.sizes());
  TORCH_CHECK(input.device() == output.device(),
              "img2gray: input and output must be on the same device, got ",
              input.device(), " and ", output.device());
  TORCH_CHECK(input.is_contiguous(), "img2gray: input must be contiguous");
  TORCH_CHECK(output.is_contiguous(), "img2gray: output must be contiguous");
}
