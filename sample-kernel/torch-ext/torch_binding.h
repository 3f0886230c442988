#pragma once

#include <ATen/core/Tensor.h>

#if defined(CPU_KERNEL)
void img2gray_cpu(const at::Tensor& input, at::Tensor& output);
#endif
#if defined(CUDA_KERNEL)
void img2gray_cuda(const at::Tensor& input, at::Tensor& output);
#endif
