// What a fused convolution applies to each output after its bias: add a residual, then its
// activation, with the eager ops' exact semantics (float add, NaN passing through each one).
#pragma once

#include <cstdint>

#include "crucible/ops/packed_conv.h"
#include "elementwise/activation_math.h"

namespace crucible::vision {

template <typename T>
struct RowEpilogue {
  const T* residual = nullptr;  // laid out like the output; may be the output buffer itself
  ConvActivation activation = ConvActivation::kNone;
  T lo = T(0), hi = T(0);  // kClamp's bounds
  bool active() const { return residual != nullptr || activation != ConvActivation::kNone; }
};

namespace detail {
template <typename T, typename F>
inline void map_row(const T* acc, const T* res, T* y, int64_t n, F f) {
  if (res != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(acc[i] + res[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(acc[i]);
  }
}
}  // namespace detail

// y[i] = activation(acc[i] + res[i]) over n elements (res may be null). acc and res may be y
// itself: each element is read before it is written at the same index.
template <typename T>
inline void finish_row(const T* acc, const T* res, T* y, int64_t n, const RowEpilogue<T>& e) {
  switch (e.activation) {
    case ConvActivation::kNone:
      detail::map_row(acc, res, y, n, [](T v) { return v; });
      break;
    case ConvActivation::kRelu:  // as the relu op: v <= 0 -> 0, NaN stays
      detail::map_row(acc, res, y, n, [](T v) { return v <= T(0) ? T(0) : v; });
      break;
    case ConvActivation::kClamp: {  // as the clamp op: NaN fails both comparisons
      const T lo = e.lo, hi = e.hi;
      detail::map_row(acc, res, y, n, [lo, hi](T v) {
        const T r = v < lo ? lo : v;
        return r > hi ? hi : r;
      });
      break;
    }
    // The mobile activations with the eager ops' formulas (activation_math.h).
    case ConvActivation::kSigmoid:
      detail::map_row(acc, res, y, n, act::Sigmoid{});
      break;
    case ConvActivation::kSilu:
      detail::map_row(acc, res, y, n, act::Silu{});
      break;
    case ConvActivation::kHardsigmoid:
      detail::map_row(acc, res, y, n, act::Hardsigmoid{});
      break;
    case ConvActivation::kHardswish:
      detail::map_row(acc, res, y, n, act::Hardswish{});
      break;
  }
}

}  // namespace crucible::vision
