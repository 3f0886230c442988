#include "scale_api.h"

#include <cstdint>

#ifndef KW_COMPONENT_ONLY
#error "the component's cxx-flags did not reach its source"
#endif
#ifdef KW_BINDING_ONLY
#error "[torch] cxx-flags reached a component source"
#endif
#ifndef CPU_KERNEL
#error "CPU_KERNEL is not defined"
#endif

void scale(torch::stable::Tensor& out, const torch::stable::Tensor& input, double factor) {
  STD_TORCH_CHECK(input.scalar_type() == torch::headeronly::ScalarType::Float &&
                      out.scalar_type() == torch::headeronly::ScalarType::Float,
                  "scale: tensors must be float32");
  STD_TORCH_CHECK(out.numel() == input.numel(), "scale: out and input differ in size");
  STD_TORCH_CHECK(factor <= KW_MAX_FACTOR, "scale: factor above ", KW_MAX_FACTOR);
  const float* in = static_cast<const float*>(input.data_ptr());
  float* result = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < input.numel(); ++i) {
    result[i] = static_cast<float>(in[i] * factor);
  }
}
