// CPU implementation. Same arithmetic as the CUDA kernel: round each product and
// each sum to float32 separately (compiled with -ffp-contract=off), then truncate.
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "img2gray_common.h"

void img2gray_cpu(const at::Tensor& input, at::Tensor& output) {
  img2gray_check_args(input, output);
  TORCH_CHECK(input.device().is_cpu(), "img2gray_cpu: tensors must be on the CPU");
  const int64_t pixels = input.size(0) * input.size(1);
  const uint8_t* in = input.data_ptr<uint8_t>();
  uint8_t* out = output.data_ptr<uint8_t>();
  for (int64_t i = 0; i < pixels; ++i) {
    const float r = in[3 * i], g = in[3 * i + 1], b = in[3 * i + 2];
    const float gray = 0.21f * r + 0.72f * g + 0.07f * b;
    out[i] = static_cast<uint8_t>(gray);
  }
}
