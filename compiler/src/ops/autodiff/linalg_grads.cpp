// Gradient rules of the linear algebra: matmul (batched, broadcast, and its 1-D cases, through
// the 2-D-or-more form), linear, addmm and embedding. Each is two GEMMs against the transposed
// other operand.
#include "autodiff/grad_builder.h"

namespace crucible::autodiff {

namespace {

ValueId t2(GradBuilder& b, ValueId v) {  // swap the last two dims
  return b.op("transpose", {v}, {{"dim0", int64_t{-2}}, {"dim1", int64_t{-1}}});
}

ValueId reshaped(GradBuilder& b, ValueId v, Shape shape) {
  return b.op("reshape", {v}, {{"shape", shape}});
}

}  // namespace

void add_linalg_grads(GradTable& t) {
  // y = a @ c, a 1-D operand seen as a row ([1,K]) or c's as a column ([K,1]), the gradient
  // given the same extra dim; then ga = gy c^T and gc = a^T gy, summed back over broadcast
  // batch dims and reshaped to the operand.
  t["matmul"] = [](GradBuilder& b) -> Grads {
    ValueId a = b.x(0), c = b.x(1), g = b.gy();
    const Shape sa = b.shape(a), sc = b.shape(c);
    if (sa.size() == 1) {
      a = reshaped(b, a, {1, sa[0]});
      Shape gs = b.shape(g);
      gs.insert(gs.end() - (sc.size() == 1 ? 0 : 1), 1);
      g = reshaped(b, g, gs);
    }
    if (sc.size() == 1) {
      c = reshaped(b, c, {sc[0], 1});
      Shape gs = b.shape(g);
      gs.push_back(1);
      g = reshaped(b, g, gs);
    }
    Grads out = {-1, -1};
    if (b.wants(0)) out[0] = reshaped(b, b.sum_to(b.op("matmul", {g, t2(b, c)}), b.shape(a)), sa);
    if (b.wants(1)) out[1] = reshaped(b, b.sum_to(b.op("matmul", {t2(b, a), g}), b.shape(c)), sc);
    return out;
  };
  // y = x w^T + bias, w [N,K]: gx = gy w, gw = gy^T x over every row, gbias = gy summed to it.
  t["linear"] = [](GradBuilder& b) -> Grads {
    const ValueId x = b.x(0), w = b.x(1);
    const Shape sx = b.shape(x), sy = b.shape(b.gy());
    Grads out(b.node().operands.size(), -1);
    if (b.wants(0)) out[0] = b.op("matmul", {b.gy(), w});
    if (b.wants(1)) {
      const int64_t rows = product(sx, 0, sx.size() - 1);
      const ValueId g2 = reshaped(b, b.gy(), {rows, sy.back()});
      const ValueId x2 = reshaped(b, x, {rows, sx.back()});
      out[1] = b.op("matmul", {t2(b, g2), x2});
    }
    if (out.size() > 2 && b.wants(2)) out[2] = b.sum_to(b.gy(), b.shape(b.x(2)));
    return out;
  };
  // y = weight[idx]: gweight = onehot(idx)^T gy over every lookup (rows looked up twice add up);
  // the indices have none.
  t["embedding"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1, -1};
    const Shape sw = b.shape(b.x(0));
    const Shape si = b.shape(b.x(1));
    const int64_t rows = shape_numel(si);
    const ValueId ids =
        b.op("arange", {}, {{"end", static_cast<double>(sw[0])}, {"dtype", b.type(b.x(1)).dtype}});
    const ValueId flat = reshaped(b, b.x(1), {rows, 1});
    const ValueId onehot = b.as_number(b.op("eq", {flat, ids}), b.gy());
    const ValueId g2 = reshaped(b, b.gy(), {rows, sw[1]});
    return {b.op("matmul", {t2(b, onehot), g2}), -1};
  };
  // y = beta c + alpha a @ m.
  t["addmm"] = [](GradBuilder& b) -> Grads {
    const double beta = b.node().attrs.get_float_or("beta", 1.0);
    const double alpha = b.node().attrs.get_float_or("alpha", 1.0);
    const ValueId g = b.gy();
    Grads out = {-1, -1, -1};
    if (b.wants(0)) out[0] = b.sum_to(b.times(g, beta), b.shape(b.x(0)));
    if (b.wants(1)) out[1] = b.times(b.op("matmul", {g, t2(b, b.x(2))}), alpha);
    if (b.wants(2)) out[2] = b.times(b.op("matmul", {t2(b, b.x(1)), g}), alpha);
    return out;
  };
}

}  // namespace crucible::autodiff
