// Shortest round-trip text of a double with std::to_chars (GLIBCXX_3.4.29).
#include <charconv>
#include <cstdint>
#include <system_error>

#include <torch/csrc/stable/tensor.h>

int64_t shortest_text(torch::stable::Tensor& out, const torch::stable::Tensor& value) {
  STD_TORCH_CHECK(value.scalar_type() == torch::headeronly::ScalarType::Double && value.numel() == 1,
                  "shortest_text: value must be one float64");
  STD_TORCH_CHECK(out.scalar_type() == torch::headeronly::ScalarType::Byte && out.numel() >= 32,
                  "shortest_text: out must be at least 32 uint8");
  char* first = static_cast<char*>(out.data_ptr());
  const double number = *static_cast<const double*>(value.data_ptr());
  const auto [last, error] = std::to_chars(first, first + out.numel(), number);
  STD_TORCH_CHECK(error == std::errc{}, "shortest_text: std::to_chars failed");
  return last - first;
}
