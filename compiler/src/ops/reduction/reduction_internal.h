// Shared pieces of the reduction and normalization kernels: vectorizable lane folds,
// NaN-propagating max/min, a branch-free float exp, and the accumulator choices per storage type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "crucible/core/dtype.h"
#include "crucible/core/fast_math.h"
#include "crucible/core/parallel_grain.h"
#include "crucible/ir/op_registry.h"

namespace crucible::reduction {

using crucible::kParallelGrain;  // parallel_grain.h: below it a parallel region costs more
// Lanes are folded into a wider total every kBlock elements (row folds) or kRowBlock rows (column
// folds): a long f32 sum then carries the rounding error of a short float sum per block plus a
// double sum across blocks, for one extra add per block.
inline constexpr int64_t kBlock = 4096;
inline constexpr int64_t kRowBlock = 128;
// Columns handled by one task of a column fold. Wide enough that a tile usually spans whole
// 4 KiB rows (tiles of a fraction of a page restart the hardware prefetcher on every row: a sum
// over dim 0 of [8192, 1024] f32 ran 1.7x slower with 256), small enough for L1/L2 partials.
inline constexpr int64_t kTile = 1024;

// Independent accumulators per row fold: four AVX2 registers' worth, enough to hide add latency.
template <typename T>
inline constexpr int kLanes = static_cast<int>(128 / sizeof(T));

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, BFloat16>;

template <typename T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

// max/min that propagate NaN (torch.amax semantics): once an accumulator holds NaN no comparison
// replaces it. Written as selects, never short-circuit branches, so that loops vectorize.
template <typename T>
inline T nan_max(T acc, T x) {
  return is_nan(x) ? x : (x > acc ? x : acc);
}
template <typename T>
inline T nan_min(T acc, T x) {
  return is_nan(x) ? x : (x < acc ? x : acc);
}

// Sums f(i) for i in [0, n) (in order within each lane). f may have side effects on index i only.
template <typename Lane, typename Wide, typename F>
inline Wide lane_sum(int64_t n, F&& f) {
  constexpr int L = kLanes<Lane>;
  Wide total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t end = std::min(n, b0 + kBlock);
    Lane lanes[L] = {};
    int64_t i = b0;
    for (; i + L <= end; i += L) {
#pragma omp simd
      for (int l = 0; l < L; ++l) lanes[l] += f(i + l);
    }
    Lane tail = 0;
    for (; i < end; ++i) tail += f(i);
    for (int w = L / 2; w > 0; w /= 2) {
      for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    }
    total += static_cast<Wide>(lanes[0]) + static_cast<Wide>(tail);
  }
  return total;
}

// Folds f(i) for i in [0, n) with an associative, commutative `comb` whose identity is `init`.
template <typename Lane, typename Comb, typename F>
inline Lane lane_fold(int64_t n, Lane init, Comb comb, F&& f) {
  constexpr int L = kLanes<Lane>;
  Lane lanes[L];
  for (int l = 0; l < L; ++l) lanes[l] = init;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
#pragma omp simd
    for (int l = 0; l < L; ++l) lanes[l] = comb(lanes[l], f(i + l));
  }
  Lane acc = init;
  for (; i < n; ++i) acc = comb(acc, f(i));
  for (int l = 0; l < L; ++l) acc = comb(acc, lanes[l]);
  return acc;
}

// exp in the accumulation type: the fast float path of crucible/core/fast_math.h (shared with
// generated code) for f32/bf16, libm for the f64 reference path. `lim` is read once per row or
// task with crucible_fast::limits(), outside the vector loops, so the clamps are min/max.
inline float exp_acc(float x, const crucible_fast::Limits& lim) {
  return crucible_fast::exp_lim_f32(x, lim);
}
inline double exp_acc(double x, const crucible_fast::Limits&) { return std::exp(x); }

// Stores v into storage type T. bf16 goes through its bits: constructing a BFloat16 temporary
// in a loop keeps GCC from vectorizing it.
template <typename T, typename V>
inline void store_as(T* p, V v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    p->bits = BFloat16::round_from_float(static_cast<float>(v));
  } else {
    *p = static_cast<T>(v);
  }
}

// Throws the shared "floating-point input" error of the float-only ops.
void require_floating(DType t, const char* operand);

void register_normalization_ops(OpRegistry& r);

}  // namespace crucible::reduction
