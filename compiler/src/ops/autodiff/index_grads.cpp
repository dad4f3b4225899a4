// Gradient rules of the index family: cumsum (the other direction's cumsum of the gradient),
// trilu (the same triangle of it), constant pad (the opposite pads), and gather/gather_elements
// and topk, whose scatter-add is a product with the indices' one-hot rows (picked twice: added
// twice).
#include <fmt/format.h>

#include "autodiff/grad_builder.h"
#include "crucible/core/error.h"

namespace crucible::autodiff {

namespace {

// The indices with negative ones counted from the end of a dim of size n.
ValueId normalized(GradBuilder& b, ValueId idx, int64_t n) {
  const ValueId negative = b.op("lt", {idx, b.scalar_like(0.0, idx)});
  return b.op("where", {negative, b.add(idx, b.scalar_like(static_cast<double>(n), idx)), idx});
}

// 1 where the index (last dim of size 1 of `idx`) is j, for j in [0, n): idx's shape with its
// last dim n, in gy's dtype.
ValueId one_hot(GradBuilder& b, ValueId idx, int64_t n) {
  const ValueId all =
      b.op("arange", {}, {{"end", static_cast<double>(n)}, {"dtype", b.type(idx).dtype}});
  return b.as_number(b.op("eq", {idx, all}), b.gy());
}

// The gradient of x (shape `sx`) for y = x gathered along `dim` at `indices` (gy's shape): gy
// times the indices' one-hot rows, summed over them, the one-hot's dim moved to dim (an index
// picked twice adds twice).
ValueId scatter_along(GradBuilder& b, ValueId indices, const Shape& sx, int64_t dim) {
  const int64_t n = sx[static_cast<size_t>(dim)];
  const ValueId idx = b.op("unsqueeze", {normalized(b, indices, n)}, {{"dim", int64_t{-1}}});
  const ValueId spread =
      b.mul(b.op("unsqueeze", {b.gy()}, {{"dim", int64_t{-1}}}), one_hot(b, idx, n));
  const ValueId summed =
      b.op("sum", {spread}, {{"dims", std::vector<int64_t>{dim}}, {"keepdim", true}});
  // [..., 1 (at dim), ..., n] -> move n to dim.
  std::vector<int64_t> order;
  const auto rank = static_cast<int64_t>(sx.size());
  for (int64_t d = 0; d < rank; ++d) order.push_back(d == dim ? rank : d);
  order.push_back(dim);
  const ValueId moved = b.op("permute", {summed}, {{"dims", order}});
  return b.op("reshape", {moved}, {{"shape", sx}});
}

}  // namespace

void add_index_grads(GradTable& t) {
  t["cumsum"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    Attrs a = b.node().attrs;
    a.set("reverse", !a.get_bool_or("reverse", false));
    return {b.op("cumsum", {b.gy()}, a)};
  };
  t["trilu"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.op("trilu", {b.gy()}, b.node().attrs)};
  };
  t["pad"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const std::string mode = b.node().attrs.get_string_or("mode", "constant");
    if (mode != "constant")
      throw GraphError(
          fmt::format("autodiff: pad mode={} has no gradient rule (constant has)", mode));
    std::vector<int64_t> pads = b.node().attrs.get_ints("pads");
    for (int64_t& p : pads) p = -p;
    return {b.op("pad", {b.gy()}, {{"pads", pads}, {"value", 0.0}})};
  };
  // y = x taken along dim at idx (any rank): [A, I, B] of gy against idx's one-hot [I, n].
  t["gather"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1, -1};
    const Shape sx = b.shape(b.x(0));
    const int64_t dim = wrap_dim(b.node().attrs.get_int("dim"), sx.size());
    const int64_t n = sx[dim], outer = product(sx, 0, dim), inner = product(sx, dim + 1, sx.size());
    const int64_t picks = shape_numel(b.shape(b.x(1)));
    const ValueId idx =
        b.op("reshape", {normalized(b, b.x(1), n)}, {{"shape", std::vector<int64_t>{picks, 1}}});
    const ValueId g3 =
        b.op("reshape", {b.gy()}, {{"shape", std::vector<int64_t>{outer, picks, inner}}});
    const ValueId swap = b.op("transpose", {g3}, {{"dim0", int64_t{1}}, {"dim1", int64_t{2}}});
    const ValueId summed = b.op("matmul", {swap, one_hot(b, idx, n)});
    const ValueId back = b.op("transpose", {summed}, {{"dim0", int64_t{1}}, {"dim1", int64_t{2}}});
    return {b.op("reshape", {back}, {{"shape", sx}}), -1};
  };
  // y[..., j, ...] = x[..., idx[..., j, ...], ...] along dim: gy times idx's one-hot, summed
  // over j, the one-hot's dim moved to dim.
  t["gather_elements"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1, -1};
    const Shape sx = b.shape(b.x(0)), si = b.shape(b.x(1));
    const int64_t dim = wrap_dim(b.node().attrs.get_int("dim"), sx.size());
    for (size_t d = 0; d < sx.size(); ++d) {
      if (static_cast<int64_t>(d) != dim && si[d] != sx[d])
        throw GraphError(
            "autodiff: gather_elements with indices smaller than the input outside its dim has "
            "no gradient rule");
    }
    return {scatter_along(b, b.x(1), sx, dim), -1};
  };
  // topk's values are x gathered at topk_indices (the same selection, ties included): the
  // gradient goes back to the elements picked.
  t["topk"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Shape sx = b.shape(b.x(0));
    const int64_t dim = wrap_dim(b.node().attrs.get_int_or("dim", -1), sx.size());
    const ValueId picked = b.op("topk_indices", {b.x(0)}, b.node().attrs);
    return {scatter_along(b, picked, sx, dim)};
  };
}

}  // namespace crucible::autodiff
