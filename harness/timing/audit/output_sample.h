// The elements of a timed call's outputs the parent verifies: positions drawn from a secret the
// timing worker never holds, read from the worker's memory, and gathered the same way from eager's
// outputs by the reference worker, so a plugin cannot compute only what will be looked at.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "crucible/core/tensor.h"

namespace crucible {

// Outputs up to this many elements are verified whole; larger ones at this many positions.
inline constexpr int64_t kSampledElements = 1024;

// Sorted positions of output `output` (of `numel` elements) of call `call`, for `secret`.
std::vector<int64_t> sampled_elements(uint64_t secret, uint64_t call, size_t output, int64_t numel);

// The elements of `t` (in logical order) at `at`, as a 1-d tensor of its dtype.
Tensor gather_elements(const Tensor& t, std::span<const int64_t> at);

}  // namespace crucible
