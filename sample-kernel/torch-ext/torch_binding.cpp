#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("img2gray(Tensor input, Tensor! output) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("img2gray", c10::kCPU, &img2gray_cpu);
#endif
#if defined(CUDA_KERNEL)
  ops.impl("img2gray", c10::kCUDA, &img2gray_cuda);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
