// When a loop is worth an OpenMP parallel region: one work threshold shared by eager's kernels and
// the kernels codegen emits, so neither side of a speed-up forks where the other would not.
#pragma once

#include <cstdint>
#include <string_view>

namespace crucible {

// Element operations (an f32 add over contiguous data counts one per element) below which a loop
// stays on one thread. Measured on a 2-core EPYC VM (bench numbers in docs/design_decisions.md,
// "Parallel grain"): a fork and join costs 3.3 us there, and an f32 add over 64 Ki elements took
// 4.5 us on one thread but 8.4 us on two; at 96 Ki (past L2) two threads win, 10.8 vs 11.2 us.
// The earlier 32 Ki made every graph of the tutorial suite about twice as slow as one thread.
inline constexpr int64_t kParallelGrain = 98304;

// What one element of a libm-class function (exp, log, sin, tanh, erf, pow...) costs in adds.
// Scalar sinf measured about 30, the vectorized exp of fast_math.h about 4: 8 parallelizes a
// transcendental loop from 12 Ki elements, where two threads already win for both.
inline constexpr int64_t kTranscendentalCost = 8;

// What one element of op `op` costs in adds: kTranscendentalCost for the libm-class ops (and those
// built on exp: softmax, sigmoid, silu, gelu; mod, a division and fmod), 0 for the ops that only
// move or view data inside a fused kernel, else 1. Eager's kernels and codegen's kernels both ask
// this, so they fork at the same sizes.
constexpr int64_t element_cost(std::string_view op) {
  for (std::string_view t :
       {"exp",  "log",  "sin",     "cos",         "tanh",  "sigmoid", "erf",  "gelu",
        "silu", "pow",  "softmax", "log_softmax", "tan",   "asin",    "acos", "atan",
        "sinh", "cosh", "asinh",   "acosh",       "atanh", "mod"}) {
    if (op == t) return kTranscendentalCost;
  }
  for (std::string_view t :
       {"reshape", "permute", "transpose", "expand", "slice", "squeeze", "unsqueeze", "cat"}) {
    if (op == t) return 0;
  }
  return 1;
}

// Whether `elements` elements of `cost` each are worth the threads.
constexpr bool worth_parallel(int64_t elements, int64_t cost = 1) {
  return elements * cost >= kParallelGrain;
}

}  // namespace crucible
