// Gradient rules of the views and cat: each moves the gradient back to the operand's layout
// (reshape, the inverse permutation, the same transpose), sums what expand broadcast, puts a
// slice's gradient back among zeros, or hands each cat operand its part.
#include <algorithm>
#include <limits>

#include "autodiff/grad_builder.h"

namespace crucible::autodiff {

namespace {

// A step-1 slice's gradient: gy between zeros for what the slice left out, along its dim.
ValueId unslice_contiguous(GradBuilder& b, int64_t dim, int64_t start, int64_t end) {
  const Shape shape = b.shape(b.x(0));
  const DType dt = b.type(b.gy()).dtype;
  std::vector<ValueId> parts;
  Shape piece = shape;
  if (start > 0) {
    piece[dim] = start;
    parts.push_back(b.filled(piece, 0.0, dt));
  }
  parts.push_back(b.gy());
  if (end < shape[dim]) {
    piece[dim] = shape[dim] - end;
    parts.push_back(b.filled(piece, 0.0, dt));
  }
  return parts.size() == 1 ? b.gy() : b.op("cat", parts, {{"dim", dim}});
}

// A strided slice's gradient: gy's elements along `dim` sent to positions start + k step by a
// 0/1 selection matrix, with the dim moved last for the product and back.
ValueId unslice_strided(GradBuilder& b, int64_t dim, int64_t start, int64_t step) {
  const Shape shape = b.shape(b.x(0));
  const int64_t count = b.shape(b.gy())[dim];
  const auto last = static_cast<int64_t>(shape.size()) - 1;
  const ValueId picked = b.op("arange", {},
                              {{"start", static_cast<double>(start)},
                               {"end", static_cast<double>(start + count * step)},
                               {"step", static_cast<double>(step)},
                               {"dtype", DType::kI64}});
  const ValueId all =
      b.op("arange", {}, {{"end", static_cast<double>(shape[dim])}, {"dtype", DType::kI64}});
  const ValueId select =
      b.as_number(b.op("eq", {b.op("unsqueeze", {picked}, {{"dim", int64_t{-1}}}), all}), b.gy());
  const ValueId moved = b.op("transpose", {b.gy()}, {{"dim0", dim}, {"dim1", last}});
  return b.op("transpose", {b.op("matmul", {moved, select})}, {{"dim0", dim}, {"dim1", last}});
}

GradRule back_to_shape() {
  return [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.op("reshape", {b.gy()}, {{"shape", b.shape(b.x(0))}})};
  };
}

}  // namespace

void add_shape_grads(GradTable& t) {
  for (const char* op : {"reshape", "squeeze", "unsqueeze"}) t[op] = back_to_shape();
  t["permute"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    std::vector<int64_t> dims = b.node().attrs.get_ints("dims");
    const auto rank = static_cast<int64_t>(dims.size());
    std::vector<int64_t> inverse(dims.size());
    for (int64_t i = 0; i < rank; ++i) inverse[wrap_dim(dims[i], dims.size())] = i;
    return {b.op("permute", {b.gy()}, {{"dims", inverse}})};
  };
  t["transpose"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.op("transpose", {b.gy()}, b.node().attrs)};
  };
  // The slice's bounds as the op normalizes them (negative from the end, clamped).
  t["slice"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Attrs& a = b.node().attrs;
    const Shape shape = b.shape(b.x(0));
    const int64_t dim = wrap_dim(a.get_int("dim"), shape.size());
    const int64_t n = shape[dim], step = a.get_int_or("step", 1);
    int64_t start = a.get_int_or("start", 0);
    int64_t end = a.get_int_or("end", std::numeric_limits<int64_t>::max());
    start = std::clamp<int64_t>(start < 0 ? start + n : start, 0, n);
    end = std::clamp<int64_t>(end < 0 ? end + n : end, start, n);
    return {step == 1 ? unslice_contiguous(b, dim, start, end)
                      : unslice_strided(b, dim, start, step)};
  };
  // Each operand's part of gy, along the cat's dim.
  t["cat"] = [](GradBuilder& b) -> Grads {
    const int64_t dim = wrap_dim(b.node().attrs.get_int_or("dim", 0), b.shape(b.y()).size());
    Grads out;
    int64_t at = 0;
    for (size_t k = 0; k < b.node().operands.size(); ++k) {
      const int64_t size = b.shape(b.x(k))[dim];
      out.push_back(b.wants(k)
                        ? b.op("slice", {b.gy()}, {{"dim", dim}, {"start", at}, {"end", at + size}})
                        : -1);
      at += size;
    }
    return out;
  };
  t["expand"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.sum_to(b.gy(), b.shape(b.x(0)))};
  };
}

}  // namespace crucible::autodiff
