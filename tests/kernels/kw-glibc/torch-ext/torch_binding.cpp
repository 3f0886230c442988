#include <string>

#include <torch/library.h>

#include "registration.h"

int64_t kw_parse_unsigned(const char* text);
int64_t kw_random_word();
int64_t kw_single_threaded();
double kw_exp(double x);
int64_t kw_file_size(const char* path);

namespace {
int64_t parse_unsigned(const std::string& text) { return kw_parse_unsigned(text.c_str()); }
int64_t random_word() { return kw_random_word(); }
int64_t single_threaded() { return kw_single_threaded(); }
double exponential(double x) { return kw_exp(x); }
int64_t file_size(const std::string& path) { return kw_file_size(path.c_str()); }
}  // namespace

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("parse_unsigned(str text) -> int", &parse_unsigned);
  ops.def("random_word() -> int", &random_word);
  ops.def("single_threaded() -> int", &single_threaded);
  ops.def("exponential(float x) -> float", &exponential);
  ops.def("file_size(str path) -> int", &file_size);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
