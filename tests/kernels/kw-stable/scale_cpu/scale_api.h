// Kept beside the component's source: the [torch] binding includes it by name.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include "kw/limits.h"

void scale(torch::stable::Tensor& out, const torch::stable::Tensor& input, double factor);
