#include <tvm/ffi/tvm_ffi.h>

#ifndef KW_BINDING_ONLY
#error "[tvm-ffi] cxx-flags must reach the binding"
#endif

#ifdef CPU_KERNEL
void add_one_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView const input);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cpu, add_one_cpu);
#endif

#ifdef CUDA_KERNEL
void add_one_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView const input);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cuda, add_one_cuda);
#endif
