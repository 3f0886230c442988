// out = input + 1 for float32 tensors on a CUDA device.
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

__global__ void add_one_kernel(float* out, const float* input, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = input[i] + 1.0f;
}

void add_one_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView const input) {
  TVM_FFI_CHECK(input.numel() == out.numel(), ValueError) << "add_one: sizes differ";
  const int64_t n = input.numel();
  if (n == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(input.device().device_type, input.device().device_id));
  add_one_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<float*>(out.data_ptr()), static_cast<const float*>(input.data_ptr()), n);
}
