#pragma once

#include <cstdint>

// Fill `n` floats with `value`, rounded through CUTLASS's half type.
void launch_fill_half_rounded(float* out, int64_t n, float value);
