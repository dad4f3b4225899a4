// One-line summaries of tensors for humans and for diffing runs: dtype, shape, a float sum, a
// bytewise FNV-1a checksum of the contiguous data, and the first few values.
#pragma once

#include <string>

#include "crucible/core/tensor.h"

namespace crucible {

uint64_t tensor_fnv1a(const Tensor& t);  // over the row-major contiguous bytes
double tensor_sum(const Tensor& t);      // in double; NaN if any element is NaN
std::string summarize_tensor(const Tensor& t, int max_values = 6);

}  // namespace crucible
