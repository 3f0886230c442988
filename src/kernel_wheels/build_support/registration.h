// Supplied by kernel-wheels' builder, as kernel-builder supplies it: kernel source
// trees include "registration.h" but do not contain it. Same macros as kernel-builder's.
#pragma once

#include <Python.h>

#ifndef CONCAT
#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#endif
#ifndef STRINGIFY
#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)
#endif

// The ops namespace is a macro (TORCH_EXTENSION_NAME, unique per build): these
// versions of torch's registration macros expand NAME before using it.
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// The same for kernels written against torch's stable ABI
// (#include <torch/csrc/stable/library.h>).
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \
  STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// The extension module's only job at import is to run the static registrations of the
// library it lives in; the module itself is empty. It uses nothing but
// PyModule_Create, which keeps it inside Python's limited API (abi3).
#define REGISTER_EXTENSION(NAME)                                                     \
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)() {                                           \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME),      \
                                        nullptr, 0, nullptr};                        \
    return PyModule_Create(&module);                                                 \
  }
