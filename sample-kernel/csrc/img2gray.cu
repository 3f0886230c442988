// CUDA implementation. img2gray moves 3 bytes in and 1 byte out per pixel and does a
// few flops, so it is bound by memory bandwidth: the kernel's job is to keep enough
// wide, coalesced requests in flight and to stay cheap in instructions.
//
// The image is a flat array of pixels; each thread turns 16 pixels (48 bytes in) into
// 16 gray bytes with one 16-byte store. The input is read with three 16-byte loads when
// it is 16-byte aligned, and with four aligned loads shifted into place when it is not
// (a view at an odd storage offset of a larger tensor). The last pixels % 16 pixels, and
// the few chunks whose aligned loads would reach outside the image, go through scalar
// code in the same launch. An output that is not 16-byte aligned (only possible by
// calling the op directly with such a view) gets a scalar kernel. One kernel per call,
// chosen on the host from the two pointers; all paths give the same bytes.
// Measured on the H200 (docs/gpu.md): 99% of the device-to-device copy rate at
// 7680x4320. Cache hints on the loads, a persistent grid-stride grid, 128- or 512-thread
// blocks, two chunks per thread and staging through shared memory were no faster; 8
// pixels per thread was up to 4% faster below 8K and no faster above, but its 24-byte
// chunks do not sit on 16-byte granules, which the shifted loads rely on.
//
// Exactness: gray = 0.21 R + 0.72 G + 0.07 B with every product and sum rounded to
// float32 (round to nearest), then truncated, which is what the CPU implementation does.
// No contraction into FMAs is allowed to change a result, so the arithmetic is spelled
// out with explicit round-to-nearest intrinsics.
#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "img2gray_common.h"

namespace {

constexpr int kBlock = 256;
constexpr int kPixelsPerThread = 16;  // 48 bytes in, 16 bytes out
constexpr float kTwo23 = 8388608.0f;  // 2^23: floats in [2^23, 2^24) are the integers

// The reference arithmetic, used by the scalar path and the vector tail.
__device__ __forceinline__ uint8_t gray_pixel(const uint8_t* __restrict__ rgb) {
  const float r = rgb[0], g = rgb[1], b = rgb[2];
  const float gray = __fadd_rn(__fadd_rn(__fmul_rn(0.21f, r), __fmul_rn(0.72f, g)),
                               __fmul_rn(0.07f, b));
  return static_cast<uint8_t>(gray);
}

// Byte k (0..47) of the 48 input bytes held in w[12], as the float 2^23 + byte: one
// byte permute instead of an integer-to-float conversion, a quarter-rate instruction.
// With conversions (48 in, 16 out per thread) the kernel was 10% slower at 1920x1080,
// 7% at 3840x2160 and 2% at 7680x4320 on the H200.
__device__ __forceinline__ float biased_channel(const uint32_t (&w)[12], int k) {
  return __uint_as_float(__byte_perm(w[k >> 2], 0x4B000000u, 0x7440u | (k & 3)));
}

// c * x rounded to nearest, for x = biased - 2^23 in 0..255. The fma computes
// c * (2^23 + x) - c * 2^23 = c * x exactly (c * 2^23 is exact: a power-of-two scale)
// and rounds once, so this equals __fmul_rn(c, x) bit for bit.
__device__ __forceinline__ float scaled(float c, float biased) {
  return __fmaf_rn(c, biased, -c * kTwo23);
}

// 16 RGB pixels (48 bytes in w) -> 16 gray bytes (o).
__device__ __forceinline__ void gray16(const uint32_t (&w)[12], uint32_t (&o)[4]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t t[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = 3 * (4 * q + j);
      const float gray = __fadd_rn(__fadd_rn(scaled(0.21f, biased_channel(w, k)),
                                             scaled(0.72f, biased_channel(w, k + 1))),
                                   scaled(0.07f, biased_channel(w, k + 2)));
      // gray is in [0, 256): 2^23 + gray rounded toward zero is 2^23 + trunc(gray),
      // whose low byte is the truncated gray value (a conversion instruction saved).
      t[j] = __float_as_uint(__fadd_rz(gray, kTwo23));
    }
    o[q] = __byte_perm(__byte_perm(t[0], t[1], 0x0040u), __byte_perm(t[2], t[3], 0x0040u),
                       0x5410u);
  }
}

// 16 pixels through the reference arithmetic (the shifted path's first and last chunks).
__device__ __forceinline__ void gray16_scalar(const uint8_t* __restrict__ input,
                                              uint8_t* __restrict__ output, int64_t c) {
#pragma unroll 4
  for (int p = 0; p < kPixelsPerThread; ++p) {
    const int64_t i = c * kPixelsPerThread + p;
    output[i] = gray_pixel(input + 3 * i);
  }
}

// Vector kernel: chunk c = pixels [16c, 16c + 16), one chunk per thread (the grid
// covers the image; it only loops for images beyond the grid limit). The output must
// be 16-byte aligned.
// kShifted = false: the input is 16-byte aligned too; three 16-byte loads per chunk.
// kShifted = true: the input starts m = input % 16 bytes into an aligned granule (a
// view at an odd storage offset, say). The chunk's 48 bytes then lie in 4 aligned
// granules: load those 64 bytes and shift them down by m bytes in registers. A chunk
// whose granules reach outside the image (the first, maybe the last) is done with byte
// loads instead, so no byte outside the tensor is ever read.
template <bool kShifted>
__global__ void __launch_bounds__(kBlock)
    img2gray_vector_kernel(const uint8_t* __restrict__ input, uint8_t* __restrict__ output,
                           int64_t chunks, int64_t pixels) {
  const int m = kShifted ? static_cast<int>(reinterpret_cast<uintptr_t>(input) & 15) : 0;
  const uint4* in = reinterpret_cast<const uint4*>(input - m);
  uint4* out = reinterpret_cast<uint4*>(output);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kBlock;
  for (int64_t c = first; c < chunks; c += stride) {
    uint32_t w[12];
    if constexpr (!kShifted) {
#pragma unroll
      for (int j = 0; j < 3; ++j) {  // all loads issued before any use
        const uint4 v = in[3 * c + j];
        w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
      }
    } else {
      // Granules 3c .. 3c + 3 hold bytes [48c, 48c + 64) from the aligned base; the
      // image's bytes are [m, m + 3 * pixels) there.
      if (c == 0 || 48 * c + 64 > m + 3 * pixels) {
        gray16_scalar(input, output, c);
        continue;
      }
      uint32_t v[16];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 g = in[3 * c + j];
        v[4 * j] = g.x, v[4 * j + 1] = g.y, v[4 * j + 2] = g.z, v[4 * j + 3] = g.w;
      }
      // Shift down by m bytes: whole words by m / 4 (selects on a value that is the
      // same for every thread, so registers are never indexed at run time), then the
      // remaining m % 4 bytes with funnel shifts.
      const int words = m >> 2, bits = 8 * (m & 3);
      uint32_t u[13];
#pragma unroll
      for (int i = 0; i < 13; ++i) {
        u[i] = words == 0 ? v[i] : words == 1 ? v[i + 1] : words == 2 ? v[i + 2] : v[i + 3];
      }
#pragma unroll
      for (int i = 0; i < 12; ++i) w[i] = __funnelshift_r(u[i], u[i + 1], bits);
    }
    uint32_t o[4];
    gray16(w, o);
    // Streaming (evict-first) store: the output is written once and not read here.
    // Measured within 1% of a plain store on the H200, never slower.
    __stcs(out + c, make_uint4(o[0], o[1], o[2], o[3]));
  }
  // The last pixels % 16 pixels: the first threads of the grid, scalar.
  const int64_t tail = chunks * kPixelsPerThread + first;
  if (tail < pixels) output[tail] = gray_pixel(input + 3 * tail);
}

// Scalar kernel, for an output that is not 16-byte aligned (only reachable by calling
// the op directly with such a view): one pixel per thread.
__global__ void __launch_bounds__(kBlock)
    img2gray_scalar_kernel(const uint8_t* __restrict__ input, uint8_t* __restrict__ output,
                           int64_t pixels) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x; i < pixels;
       i += stride) {
    output[i] = gray_pixel(input + 3 * i);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// One thread per work item; beyond the grid limit the kernels loop (grid-stride).
unsigned grid_for(int64_t items) {
  constexpr int64_t kMaxBlocks = 1 << 30;
  const int64_t blocks = (items + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace

void img2gray_cuda(const at::Tensor& input, at::Tensor& output) {
  img2gray_check_args(input, output);
  TORCH_CHECK(input.device().is_cuda(), "img2gray_cuda: tensors must be on a CUDA device");
  const int64_t pixels = input.size(0) * input.size(1);
  if (pixels == 0) return;

  const c10::cuda::CUDAGuard device_guard(input.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const uint8_t* in = input.const_data_ptr<uint8_t>();
  uint8_t* out = output.mutable_data_ptr<uint8_t>();
  if (aligned16(out)) {
    const int64_t chunks = pixels / kPixelsPerThread;
    const int64_t tail = pixels - chunks * kPixelsPerThread;
    const unsigned grid = grid_for(chunks > tail ? chunks : tail);
    if (aligned16(in)) {
      img2gray_vector_kernel<false><<<grid, kBlock, 0, stream>>>(in, out, chunks, pixels);
    } else {
      img2gray_vector_kernel<true><<<grid, kBlock, 0, stream>>>(in, out, chunks, pixels);
    }
  } else {
    img2gray_scalar_kernel<<<grid_for(pixels), kBlock, 0, stream>>>(in, out, pixels);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
