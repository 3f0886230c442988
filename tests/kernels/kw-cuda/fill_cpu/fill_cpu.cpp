#include <cstdint>

#include <torch/csrc/stable/tensor.h>

void fill_half_rounded(torch::stable::Tensor& out, double value) {
  STD_TORCH_CHECK(out.scalar_type() == torch::headeronly::ScalarType::Float,
                  "fill_half_rounded: out must be float32");
  float* data = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < out.numel(); ++i) data[i] = static_cast<float>(value);
}
