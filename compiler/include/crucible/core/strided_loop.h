// The one N-operand strided iteration every elementwise loop builds on: it coalesces dimensions,
// then walks rows of the innermost dimension (optionally in parallel) and hands each row to a body.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "crucible/core/parallel_grain.h"

namespace crucible {

// Element strides of N operands over one iteration shape (0 where an operand is broadcast).
template <size_t N>
struct StridedLayout {
  std::vector<int64_t> shape;                   // after coalescing; innermost last; never empty
  std::array<std::vector<int64_t>, N> strides;  // same rank as shape
};

// Merges adjacent dimensions that are contiguous with each other in every operand and drops size-1
// dimensions, so [16384,512] contiguous becomes one row of 8M elements and a broadcast row stays
// 2-D.
template <size_t N>
StridedLayout<N> coalesce(std::span<const int64_t> shape,
                          const std::array<std::span<const int64_t>, N>& strides) {
  StridedLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = out.strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      out.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Calls body(offsets, n, inner_strides) for every row, where offsets[k] is operand k's element
// offset of the row's first element, n the row length, inner_strides[k] operand k's stride along
// it. Rows are split across OpenMP threads when the work, `cost` element operations per element
// (0: never parallel), passes kParallelGrain.
template <size_t N, typename Body>
void for_each_row(const StridedLayout<N>& layout, int64_t cost, Body&& body) {
  const int64_t rank = static_cast<int64_t>(layout.shape.size());
  const int64_t inner = layout.shape.back();
  if (inner == 0) return;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= layout.shape[d];
  if (rows == 0) return;
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = layout.strides[k].back();

  const int64_t total = rows * inner;
  const bool go_parallel = cost > 0 && worth_parallel(total, cost) && omp_get_max_threads() > 1;
  if (rows == 1) {
    // A long single row is split into chunks so one contiguous tensor still uses every thread.
    const int64_t min_chunk =
        std::max<int64_t>(kParallelGrain / (2 * std::max<int64_t>(cost, 1)), 1);
    const int64_t chunks =
        go_parallel ? std::clamp<int64_t>(inner / min_chunk, 1, 4 * omp_get_max_threads()) : 1;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = inner * c / chunks, end = inner * (c + 1) / chunks;
      std::array<int64_t, N> offsets;
      for (size_t k = 0; k < N; ++k) offsets[k] = begin * inner_strides[k];
      body(offsets, end - begin, inner_strides);
    }
    return;
  }
#pragma omp parallel if (go_parallel)
  {
    const int nthreads = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t begin = rows * tid / nthreads, end = rows * (tid + 1) / nthreads;
    if (begin < end) {
      // Multi-index of row `begin` over the outer dimensions, then an odometer.
      std::vector<int64_t> idx(rank > 1 ? rank - 1 : 1, 0);
      std::array<int64_t, N> offsets{};
      int64_t r = begin;
      for (int64_t d = rank - 2; d >= 0; --d) {
        idx[d] = r % layout.shape[d];
        r /= layout.shape[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += idx[d] * layout.strides[k][d];
      }
      for (int64_t row = begin; row < end; ++row) {
        body(offsets, inner, inner_strides);
        for (int64_t d = rank - 2; d >= 0; --d) {
          for (size_t k = 0; k < N; ++k) offsets[k] += layout.strides[k][d];
          if (++idx[d] < layout.shape[d]) break;
          for (size_t k = 0; k < N; ++k) offsets[k] -= layout.shape[d] * layout.strides[k][d];
          idx[d] = 0;
        }
      }
    }
  }
}

}  // namespace crucible
