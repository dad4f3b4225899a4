// Shared pieces of the index ops (gather, along-a-dim, position): the dim of a rank >= 1 operand,
// a tensor seen as lines along one dim, bit-moving dtype dispatch, and index operand checks.
#pragma once

#include <omp.h>

#include <cstdint>
#include <vector>

#include "crucible/core/parallel_grain.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible::index {

// `dim` of a tensor of shape `shape` wrapped into [0, rank); throws Error for a 0-d tensor or a dim
// out of [-rank, rank).
int64_t axis_of(const Shape& shape, int64_t dim);

// Throws Error unless `t` is i32 or i64 (what ONNX's indices are).
void require_index_dtype(DType t, const char* operand);

// Index values as i64 (contiguous), each wrapped from [-size, size) into [0, size); throws Error
// "index V is out of range for dimension D of size N" for the first that is not.
std::vector<int64_t> wrapped_indices(const Tensor& index, int64_t size, int64_t dim);

// A contiguous tensor as lines along `axis`: element (o, j, i) is at (o * n + j) * inner + i.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
};
Lines lines_around(const Shape& shape, int64_t axis);

// Calls f(o, i) for every line, in parallel when the lines' `cost`-weighted elements warrant it.
template <typename F>
void for_each_line(const Lines& l, int64_t cost, F&& f) {
  const int64_t lines = l.count();
#pragma omp parallel for schedule(static) if (worth_parallel(lines * l.n, cost) && lines > 1)
  for (int64_t line = 0; line < lines; ++line) f(line / l.inner, line % l.inner);
}

// Calls f.template operator()<U>() with U the unsigned integer of dtype `t`'s size: the ops that
// only move elements move their bits.
template <typename F>
decltype(auto) dispatch_bits(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1:
      return f.template operator()<uint8_t>();
    case 2:
      return f.template operator()<uint16_t>();
    case 4:
      return f.template operator()<uint32_t>();
    default:
      return f.template operator()<uint64_t>();
  }
}

}  // namespace crucible::index
