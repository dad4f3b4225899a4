// Gradient rules of the reductions and normalizations: sum and mean stretch the gradient back
// over the reduced dims; amax and amin give it to the extreme elements (ties share it evenly, as
// PyTorch's do); prod the product of the others (zeros handled as PyTorch does); var through the
// mean; softmax and log_softmax by their Jacobian-vector forms; layer_norm by its closed form.
#include "autodiff/grad_builder.h"

namespace crucible::autodiff {

namespace {

// The reduction's dims and keepdim, and the count of elements each result reduces.
struct Reduced {
  std::vector<int64_t> dims;
  bool keepdim;
  double count = 1;
};

Reduced reduced(GradBuilder& b) {
  const Shape shape = b.shape(b.x(0));
  Reduced r{reduced_dims(b.node().attrs, shape.size()),
            b.node().attrs.get_bool_or("keepdim", false)};
  for (int64_t d : r.dims) r.count *= static_cast<double>(shape[d]);
  return r;
}

// The softmax family's dim, normalized.
int64_t softmax_dim(GradBuilder& b) {
  return wrap_dim(b.node().attrs.get_int("dim"), b.shape(b.x(0)).size());
}

ValueId sum_over(GradBuilder& b, ValueId v, int64_t dim) {
  return b.op("sum", {v}, {{"dims", std::vector<int64_t>{dim}}, {"keepdim", true}});
}

}  // namespace

void add_reduction_grads(GradTable& t) {
  t["sum"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Reduced r = reduced(b);
    return {b.expand_over(b.gy(), b.shape(b.x(0)), r.dims, r.keepdim)};
  };
  t["mean"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Reduced r = reduced(b);
    return {b.expand_over(b.times(b.gy(), 1.0 / r.count), b.shape(b.x(0)), r.dims, r.keepdim)};
  };
  for (const char* op : {"amax", "amin"}) {
    t[op] = [](GradBuilder& b) -> Grads {
      if (!b.wants(0)) return {-1};
      const Reduced r = reduced(b);
      const Shape shape = b.shape(b.x(0));
      const ValueId hit =
          b.as_number(b.op("eq", {b.x(0), b.expand_over(b.y(), shape, r.dims, r.keepdim)}), b.gy());
      const ValueId ties = b.op("sum", {hit}, {{"dims", r.dims}, {"keepdim", true}});
      const ValueId share = b.div(b.expand_over(b.gy(), shape, r.dims, r.keepdim),
                                  b.op("expand", {ties}, {{"shape", shape}}));
      return {b.mul(hit, share)};
    };
  }
  // Each element's gradient is the product of the others, as PyTorch's prod_backward: with no
  // zero in its reduction the result over the element; with one zero, the product of the others
  // for it and 0 elsewhere; with more, 0 (no path divides by zero).
  t["prod"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Reduced r = reduced(b);
    const Shape shape = b.shape(b.x(0));
    const ValueId x = b.x(0), zero = b.scalar_like(0.0, x);
    const ValueId is_zero = b.op("eq", {x, zero});
    const ValueId nonzero = b.op("where", {is_zero, b.scalar_like(1.0, x), x});
    const auto spread = [&](ValueId kept) { return b.op("expand", {kept}, {{"shape", shape}}); };
    const ValueId of_nonzeros =
        spread(b.op("prod", {nonzero}, {{"dims", r.dims}, {"keepdim", true}}));
    const ValueId zeros =
        spread(b.op("sum", {b.as_number(is_zero, x)}, {{"dims", r.dims}, {"keepdim", true}}));
    const ValueId only_zero =
        b.op("logical_and", {is_zero, b.op("eq", {zeros, b.scalar_like(1.0, x)})});
    const ValueId others = b.op("where", {b.op("eq", {zeros, zero}), b.div(of_nonzeros, nonzero),
                                          b.op("where", {only_zero, of_nonzeros, zero})});
    return {b.mul(b.expand_over(b.gy(), shape, r.dims, r.keepdim), others)};
  };
  // var = sum((x - m)^2) / (N - correction): 2 (x - m) / (N - correction).
  t["var"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const Reduced r = reduced(b);
    const Shape shape = b.shape(b.x(0));
    const double divisor =
        r.count - static_cast<double>(b.node().attrs.get_int_or("correction", 1));
    const ValueId mean = b.op("mean", {b.x(0)}, {{"dims", r.dims}, {"keepdim", true}});
    const ValueId centered = b.sub(b.x(0), mean);
    const ValueId g = b.expand_over(b.gy(), shape, r.dims, r.keepdim);
    return {b.mul(g, b.times(centered, 2.0 / divisor))};
  };
  // y = xhat w + b, xhat = (x - mean) rstd over the normalized (last) dims: gx = rstd (g -
  // mean(g) - xhat mean(g xhat)) with g = gy w; gw = gy xhat and gb = gy, summed to their shapes.
  t["layer_norm"] = [](GradBuilder& b) -> Grads {
    const ValueId x = b.x(0);
    const Shape shape = b.shape(x);
    const auto k = static_cast<int64_t>(b.node().attrs.get_ints("normalized_shape").size());
    std::vector<int64_t> dims;
    for (auto d = static_cast<int64_t>(shape.size()) - k; d < static_cast<int64_t>(shape.size());
         ++d)
      dims.push_back(d);
    auto mean = [&](ValueId v) { return b.op("mean", {v}, {{"dims", dims}, {"keepdim", true}}); };
    const ValueId centered = b.sub(x, mean(x));
    const ValueId var = mean(b.mul(centered, centered));
    const double eps = b.node().attrs.get_float_or("eps", 1e-5);
    const ValueId rstd = b.op("rsqrt", {b.add(var, b.scalar_like(eps, var))});
    const ValueId xhat = b.mul(centered, rstd);
    const size_t n = b.node().operands.size();
    Grads out(n, -1);
    const ValueId g = n > 1 ? b.mul(b.gy(), b.x(1)) : b.gy();
    if (b.wants(0))
      out[0] = b.mul(rstd, b.sub(b.sub(g, mean(g)), b.mul(xhat, mean(b.mul(g, xhat)))));
    if (n > 1 && b.wants(1)) out[1] = b.sum_to(b.mul(b.gy(), xhat), b.shape(b.x(1)));
    if (n > 2 && b.wants(2)) out[2] = b.sum_to(b.gy(), b.shape(b.x(2)));
    return out;
  };
  // y = softmax(x): y (gy - sum(gy y)).
  t["softmax"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const int64_t dim = softmax_dim(b);
    const ValueId gyy = b.mul(b.gy(), b.y());
    return {b.sub(gyy, b.mul(b.y(), sum_over(b, gyy, dim)))};
  };
  // y = log_softmax(x): gy - exp(y) sum(gy).
  t["log_softmax"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const int64_t dim = softmax_dim(b);
    return {b.sub(b.gy(), b.mul(b.op("exp", {b.y()}), sum_over(b, b.gy(), dim)))};
  };
}

}  // namespace crucible::autodiff
