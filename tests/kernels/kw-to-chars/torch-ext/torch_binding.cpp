#include <cstdint>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include "registration.h"

int64_t shortest_text(torch::stable::Tensor& out, const torch::stable::Tensor& value);

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("shortest_text(Tensor! out, Tensor value) -> int");
}

STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("shortest_text", TORCH_BOX(&shortest_text));
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
