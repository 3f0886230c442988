#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include "registration.h"

void fill_half_rounded(torch::stable::Tensor& out, double value);

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("fill_half_rounded(Tensor! out, float value) -> ()");
}

#if defined(CUDA_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("fill_half_rounded", TORCH_BOX(&fill_half_rounded));
}
#elif defined(CPU_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("fill_half_rounded", TORCH_BOX(&fill_half_rounded));
}
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
