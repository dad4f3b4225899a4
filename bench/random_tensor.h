// The benchmarks' operands: a fresh f32 tensor of normal or uniform values, the same for a given
// seed, so both sides of a side-by-side benchmark read identical data.
#pragma once

#include <cstdint>
#include <utility>

#include "crucible/core/rng.h"
#include "crucible/core/tensor.h"

namespace crucible::bench {

inline Tensor randn(Shape shape, uint64_t seed, double std = 1.0) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_randn(t, seed, 0.0, std);
  return t;
}

// Values drawn uniformly from [low, high).
inline Tensor uniform(Shape shape, uint64_t seed, double low, double high) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_uniform(t, seed, low, high);
  return t;
}

}  // namespace crucible::bench
