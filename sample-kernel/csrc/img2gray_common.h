#pragma once
// Input validation shared by every backend, so that a direct call of the op
// (torch.ops.<namespace>.img2gray) fails as clearly as the Python wrapper.
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

// "(8, 9)", built with std::to_string. On the H200 machine (torch 2.11, g++ 13), the
// CUDA variant's wrong-output-shape error, whose message streamed output.sizes(),
// crashed the process (segmentation fault) instead of raising; with this it raises.
// A standalone program streaming an IntArrayRef did not crash there, so the cause is
// not pinned down: keep shapes out of the streamed arguments.
inline std::string img2gray_shape(const at::Tensor& t) {
  std::string text = "(";
  for (int64_t d = 0; d < t.dim(); ++d) {
    text += (d ? ", " : "") + std::to_string(t.size(d));
  }
  return text + ")";
}

inline void img2gray_check_args(const at::Tensor& input, const at::Tensor& output) {
  TORCH_CHECK(input.scalar_type() == at::kByte,
              "img2gray: input must be uint8, got ", input.scalar_type());
  TORCH_CHECK(output.scalar_type() == at::kByte,
              "img2gray: output must be uint8, got ", output.scalar_type());
  TORCH_CHECK(input.dim() == 3 && input.size(2) == 3,
              "img2gray: input must have shape (H, W, 3), got " + img2gray_shape(input));
  TORCH_CHECK(output.dim() == 2 && output.size(0) == input.size(0) &&
                  output.size(1) == input.size(1),
              "img2gray: output must have shape (H, W) = (" + std::to_string(input.size(0)) +
                  ", " + std::to_string(input.size(1)) + "), got " + img2gray_shape(output));
  TORCH_CHECK(input.device() == output.device(),
              "img2gray: input and output must be on the same device, got ",
              input.device(), " and ", output.device());
  TORCH_CHECK(input.is_contiguous(), "img2gray: input must be contiguous");
  TORCH_CHECK(output.is_contiguous(), "img2gray: output must be contiguous");
}
