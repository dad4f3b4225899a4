// 64-bit digests of tensors (dtype, shape and every element's bytes in logical order), so the
// timing audit can compare each timed call's outputs with the checked ones without keeping copies;
// and of plain bytes (the minifier's candidate keys and repro manifests).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "crucible/core/tensor.h"

namespace crucible {

uint64_t digest(const Tensor& t);
uint64_t digest_bytes(const void* data, size_t n, uint64_t seed = 0);
std::vector<uint64_t> digest_all(std::span<const Tensor> tensors);

}  // namespace crucible
