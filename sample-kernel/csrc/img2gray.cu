// CUDA implementation: one thread per pixel on a 2D grid of 16x16 blocks, launched on
// the current stream of the input's device.
#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "img2gray_common.h"

__global__ void img2gray_kernel(const uint8_t* __restrict__ input, uint8_t* __restrict__ output,
                                int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  const int64_t i = static_cast<int64_t>(y) * width + x;
  const float r = input[3 * i], g = input[3 * i + 1], b = input[3 * i + 2];
  // Explicit round-to-nearest ops: no FMA contraction, so the result equals the
  // CPU implementation bit for bit.
  const float gray = __fadd_rn(__fadd_rn(__fmul_rn(0.21f, r), __fmul_rn(0.72f, g)),
                               __fmul_rn(0.07f, b));
  output[i] = static_cast<uint8_t>(gray);
}

void img2gray_cuda(const at::Tensor& input, at::Tensor& output) {
  img2gray_check_args(input, output);
  TORCH_CHECK(input.device().is_cuda(), "img2gray_cuda: tensors must be on a CUDA device");
  TORCH_CHECK(input.size(0) < INT32_MAX && input.size(1) < INT32_MAX,
              "img2gray: image too large");
  const int height = static_cast<int>(input.size(0));
  const int width = static_cast<int>(input.size(1));
  if (height == 0 || width == 0) return;

  const c10::cuda::CUDAGuard device_guard(input.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const dim3 block(16, 16);
  const dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);
  img2gray_kernel<<<grid, block, 0, stream>>>(input.data_ptr<uint8_t>(),
                                              output.data_ptr<uint8_t>(), width, height);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
