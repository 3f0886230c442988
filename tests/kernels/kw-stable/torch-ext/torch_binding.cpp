#include <torch/csrc/stable/library.h>

#include "registration.h"
#include "scale_api.h"

#ifndef KW_BINDING_ONLY
#error "[torch] cxx-flags did not reach the binding"
#endif
#ifdef KW_COMPONENT_ONLY
#error "a component's cxx-flags reached the binding"
#endif

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("scale(Tensor! out, Tensor input, float factor) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("scale", TORCH_BOX(&scale));
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
