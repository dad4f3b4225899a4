// 64-bit digests of tensors (dtype, shape and every element's bytes in logical order), so the
// timing audit can compare each timed call's outputs with the checked ones without keeping copies.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "crucible/core/tensor.h"

namespace crucible {

uint64_t digest(const Tensor& t);
std::vector<uint64_t> digest_all(std::span<const Tensor> tensors);

}  // namespace crucible
