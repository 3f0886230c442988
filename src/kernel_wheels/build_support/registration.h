// Supplied by kernel-wheels' builder, as kernel-builder supplies it: kernel source
// trees include "registration.h" but do not contain it.
#pragma once

#include <Python.h>

#define _KW_CONCAT(A, B) A##B
#define KW_CONCAT(A, B) _KW_CONCAT(A, B)
#define _KW_STRINGIFY(A) #A
#define KW_STRINGIFY(A) _KW_STRINGIFY(A)

#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// The extension module's only job at import is to run the static TORCH_LIBRARY
// registrations of the library it lives in; the module itself is empty. It uses
// nothing but PyModule_Create, which keeps it inside Python's limited API (abi3).
#define REGISTER_EXTENSION(NAME)                                                     \
  extern "C" PyMODINIT_FUNC KW_CONCAT(PyInit_, NAME)() {                             \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, KW_STRINGIFY(NAME),   \
                                        nullptr, 0, nullptr};                        \
    return PyModule_Create(&module);                                                 \
  }
