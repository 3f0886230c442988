#include <cstdint>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include "registration.h"

int64_t cutlass_version();
int64_t archive_mark();

namespace {
// A tensor argument picks the CPU kernel; its value is not used.
int64_t version_op(const torch::stable::Tensor&) { return cutlass_version(); }
int64_t mark_op(const torch::stable::Tensor&) { return archive_mark(); }
}  // namespace

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("cutlass_version(Tensor like) -> int");
  ops.def("archive_mark(Tensor like) -> int");
}

STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("cutlass_version", TORCH_BOX(&version_op));
  ops.impl("archive_mark", TORCH_BOX(&mark_op));
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
