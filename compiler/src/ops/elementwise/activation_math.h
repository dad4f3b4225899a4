// The activation formulas the eager ops and the packed convolution's fused epilogue share, so a
// fused call rounds as the separate ops do: float through fast_math.h's vectorizable exp, tanh and
// erf (PyTorch's eager kernels run SLEEF's vectors), double through libm.
#pragma once

#include <cmath>
#include <type_traits>

#include "crucible/core/fast_math.h"

namespace crucible::act {

template <typename C>
inline C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return crucible_fast::exp_f32(x);
  } else {
    return std::exp(x);
  }
}
template <typename C>
inline C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return crucible_fast::tanh_f32(x);
  } else {
    return std::tanh(x);
  }
}
template <typename C>
inline C erf_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return crucible_fast::erf_f32(x);
  } else {
    return std::erf(x);
  }
}

struct Sigmoid {
  template <typename C>
  C operator()(C x) const {
    return C(1) / (C(1) + exp_of(-x));  // exp overflow gives 1/inf = 0: the right limit
  }
};

// The activations of mobile networks. silu computes sigmoid as 1 / (1 + exp(-x)) (the exp
// codegen's sigmoid uses, so the decomposed silu agrees with this one). hardsigmoid / hardswish
// clamp x + 3 to [0, 6] with comparisons that a NaN fails, so NaN propagates as in PyTorch, and
// divide by 6 as PyTorch does.
struct Silu {
  template <typename C>
  C operator()(C x) const {
    return x * (C(1) / (C(1) + exp_of(-x)));
  }
};
template <typename C>
inline C relu6_of_x_plus_3(C x) {
  C t = x + C(3);
  t = t < C(0) ? C(0) : t;
  return t > C(6) ? C(6) : t;
}
struct Hardsigmoid {
  template <typename C>
  C operator()(C x) const {
    return relu6_of_x_plus_3(x) / C(6);
  }
};
struct Hardswish {
  template <typename C>
  C operator()(C x) const {
    return x * relu6_of_x_plus_3(x) / C(6);
  }
};

}  // namespace crucible::act
