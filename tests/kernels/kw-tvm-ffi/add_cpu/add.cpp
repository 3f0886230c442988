// out = input + 1 for float32 tensors (TVM_FFI_CHECK's messages use std::ostringstream,
// whose constructor is a weak template instance in libstdc++.a: GLIBCXX_3.4.26).
#include <cstdint>

#include <tvm/ffi/tvm_ffi.h>

#ifdef KW_BINDING_ONLY
#error "[tvm-ffi] cxx-flags must not reach the components"
#endif

void add_one_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView const input) {
  constexpr DLDataType float32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(input.dtype() == float32 && out.dtype() == float32, TypeError) << "add_one: float32 only";
  TVM_FFI_CHECK(input.numel() == out.numel(), ValueError) << "add_one: sizes differ";
  TVM_FFI_CHECK(input.IsContiguous() && out.IsContiguous(), ValueError) << "add_one: contiguous only";
  const float* in = static_cast<const float*>(input.data_ptr());
  float* result = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < input.numel(); ++i) result[i] = in[i] + 1.0f;
}
