// Gradient rules of the elementwise family: unary math (from the result where that is cheaper,
// as PyTorch's derivatives do), the binary ops with broadcast operands summed back, where, clamp
// and float casts. Rounding ops (floor, ceil, round, sign) have a zero gradient.
#include <cmath>
#include <numbers>
#include <string>

#include "autodiff/grad_builder.h"

namespace crucible::autodiff {

namespace {

// A rule for a unary op whose derivative is d(x, y): gy * d.
GradRule unary(std::function<ValueId(GradBuilder&, ValueId x, ValueId y)> d) {
  return [d](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.mul(b.gy(), d(b, b.x(0), b.y()))};
  };
}

// 1 - v * v.
ValueId one_minus_square(GradBuilder& b, ValueId v) {
  return b.sub(b.scalar_like(1.0, v), b.mul(v, v));
}

void add_unary_math(GradTable& t) {
  t["neg"] = [](GradBuilder& b) -> Grads { return {b.wants(0) ? b.neg(b.gy()) : -1}; };
  t["abs"] = unary([](GradBuilder& b, ValueId x, ValueId) { return b.op("sign", {x}); });
  t["exp"] = unary([](GradBuilder&, ValueId, ValueId y) { return y; });
  t["log"] = [](GradBuilder& b) -> Grads { return {b.wants(0) ? b.div(b.gy(), b.x(0)) : -1}; };
  t["sqrt"] = [](GradBuilder& b) -> Grads {
    return {b.wants(0) ? b.div(b.gy(), b.times(b.y(), 2.0)) : -1};
  };
  // y = x^-1/2: dy/dx = -y^3 / 2.
  t["rsqrt"] = unary(
      [](GradBuilder& b, ValueId, ValueId y) { return b.times(b.mul(b.mul(y, y), y), -0.5); });
  t["reciprocal"] = unary([](GradBuilder& b, ValueId, ValueId y) { return b.neg(b.mul(y, y)); });
  t["sin"] = unary([](GradBuilder& b, ValueId x, ValueId) { return b.op("cos", {x}); });
  t["cos"] = unary([](GradBuilder& b, ValueId x, ValueId) { return b.neg(b.op("sin", {x})); });
  t["tan"] = unary(
      [](GradBuilder& b, ValueId, ValueId y) { return b.add(b.scalar_like(1.0, y), b.mul(y, y)); });
  t["sinh"] = unary([](GradBuilder& b, ValueId x, ValueId) { return b.op("cosh", {x}); });
  t["cosh"] = unary([](GradBuilder& b, ValueId x, ValueId) { return b.op("sinh", {x}); });
  t["tanh"] = unary([](GradBuilder& b, ValueId, ValueId y) { return one_minus_square(b, y); });
  t["sigmoid"] = unary(
      [](GradBuilder& b, ValueId, ValueId y) { return b.mul(y, b.sub(b.scalar_like(1.0, y), y)); });
  t["asin"] = unary(
      [](GradBuilder& b, ValueId x, ValueId) { return b.op("rsqrt", {one_minus_square(b, x)}); });
  t["acos"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.neg(b.op("rsqrt", {one_minus_square(b, x)}));
  });
  t["atan"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.op("reciprocal", {b.add(b.scalar_like(1.0, x), b.mul(x, x))});
  });
  t["asinh"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.op("rsqrt", {b.add(b.mul(x, x), b.scalar_like(1.0, x))});
  });
  t["acosh"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.op("rsqrt", {b.sub(b.mul(x, x), b.scalar_like(1.0, x))});
  });
  t["atanh"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.op("reciprocal", {one_minus_square(b, x)});
  });
  // erf' = 2 / sqrt(pi) * exp(-x^2).
  t["erf"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    return b.times(b.op("exp", {b.neg(b.mul(x, x))}), 2.0 / std::sqrt(std::numbers::pi));
  });
}

void add_activations(GradTable& t) {
  t["relu"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.masked(b.op("gt", {b.x(0), b.scalar_like(0.0, b.x(0))}), b.gy())};
  };
  // silu = x s(x): s (1 + x (1 - s)).
  t["silu"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    const ValueId s = b.op("sigmoid", {x});
    return b.mul(s, b.add(b.scalar_like(1.0, x), b.mul(x, b.sub(b.scalar_like(1.0, x), s))));
  });
  t["gelu"] = unary([](GradBuilder& b, ValueId x, ValueId) {
    const std::string approximate = b.node().attrs.get_string_or("approximate", "none");
    if (approximate == "tanh") {
      // y = x/2 (1 + tanh u), u = c (x + k x^3): y' = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) u'.
      const double c = std::sqrt(2.0 / std::numbers::pi), k = 0.044715;
      const ValueId x2 = b.mul(x, x);
      const ValueId u = b.times(b.add(x, b.times(b.mul(x2, x), k)), c);
      const ValueId th = b.op("tanh", {u});
      const ValueId du = b.times(b.add(b.scalar_like(1.0, x), b.times(x2, 3.0 * k)), c);
      const ValueId left = b.times(b.add(b.scalar_like(1.0, x), th), 0.5);
      return b.add(left, b.mul(b.times(x, 0.5), b.mul(one_minus_square(b, th), du)));
    }
    // y = x Phi(x): Phi(x) + x phi(x), Phi = (1 + erf(x / sqrt 2)) / 2, phi = e^(-x^2/2)/sqrt(2pi).
    const ValueId cdf =
        b.times(b.add(b.scalar_like(1.0, x), b.op("erf", {b.times(x, 1.0 / std::sqrt(2.0))})), 0.5);
    const ValueId pdf =
        b.times(b.op("exp", {b.times(b.mul(x, x), -0.5)}), 1.0 / std::sqrt(2.0 * std::numbers::pi));
    return b.add(cdf, b.mul(x, pdf));
  });
  // hardsigmoid = clamp(x / 6 + 1/2, 0, 1): 1/6 strictly inside (-3, 3).
  t["hardsigmoid"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const ValueId x = b.x(0);
    const ValueId inside = b.op("logical_and", {b.op("gt", {x, b.scalar_like(-3.0, x)}),
                                                b.op("lt", {x, b.scalar_like(3.0, x)})});
    return {b.masked(inside, b.times(b.gy(), 1.0 / 6.0))};
  };
  // hardswish = x hardsigmoid(x): 0 below -3, x/3 + 1/2 up to 3, 1 above (PyTorch's).
  t["hardswish"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const ValueId x = b.x(0);
    const ValueId mid = b.add(b.times(x, 1.0 / 3.0), b.scalar_like(0.5, x));
    const ValueId upper =
        b.op("where", {b.op("le", {x, b.scalar_like(3.0, x)}), mid, b.scalar_like(1.0, x)});
    const ValueId d =
        b.op("where", {b.op("lt", {x, b.scalar_like(-3.0, x)}), b.scalar_like(0.0, x), upper});
    return {b.mul(b.gy(), d)};
  };
  // clamp: gy where min <= x <= max (PyTorch's: the bounds pass it).
  t["clamp"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    const ValueId x = b.x(0);
    const Attrs& a = b.node().attrs;
    ValueId keep = -1;
    auto both = [&](ValueId m) { return keep < 0 ? m : b.op("logical_and", {keep, m}); };
    if (const auto lo = a.get_optional_float("min"))
      keep = both(b.op("ge", {x, b.scalar_like(*lo, x)}));
    if (const auto hi = a.get_optional_float("max"))
      keep = both(b.op("le", {x, b.scalar_like(*hi, x)}));
    return {keep < 0 ? b.gy() : b.masked(keep, b.gy())};
  };
  for (const char* op : {"floor", "ceil", "round", "sign"}) {
    t[op] = [](GradBuilder& b) -> Grads {
      return {b.wants(0) ? b.mul(b.gy(), b.scalar_like(0.0, b.gy())) : -1};
    };
  }
  // A float cast's gradient is cast back (an integer operand has none).
  t["cast"] = [](GradBuilder& b) -> Grads {
    if (!b.wants(0)) return {-1};
    return {b.op("cast", {b.gy()}, {{"dtype", b.type(b.x(0)).dtype}})};
  };
}

void add_binary(GradTable& t) {
  auto to = [](GradBuilder& b, size_t k, ValueId g) {
    return b.wants(k) ? b.sum_to(g, b.shape(b.x(k))) : ValueId{-1};
  };
  t["add"] = [to](GradBuilder& b) -> Grads { return {to(b, 0, b.gy()), to(b, 1, b.gy())}; };
  t["sub"] = [to](GradBuilder& b) -> Grads {
    return {to(b, 0, b.gy()), b.wants(1) ? to(b, 1, b.neg(b.gy())) : -1};
  };
  t["mul"] = [to](GradBuilder& b) -> Grads {
    return {b.wants(0) ? to(b, 0, b.mul(b.gy(), b.x(1))) : -1,
            b.wants(1) ? to(b, 1, b.mul(b.gy(), b.x(0))) : -1};
  };
  // y = a / b: ga = gy / b, gb = -gy y / b.
  t["div"] = [to](GradBuilder& b) -> Grads {
    return {b.wants(0) ? to(b, 0, b.div(b.gy(), b.x(1))) : -1,
            b.wants(1) ? to(b, 1, b.neg(b.div(b.mul(b.gy(), b.y()), b.x(1)))) : -1};
  };
  // y = a^e: ga = gy e a^(e-1); ge = gy y log(a), 0 where a == 0 (PyTorch's mask).
  t["pow"] = [to](GradBuilder& b) -> Grads {
    const ValueId a = b.x(0), e = b.x(1);
    Grads out = {-1, -1};
    if (b.wants(0)) {
      const ValueId em1 = b.sub(e, b.scalar_like(1.0, e));
      out[0] = to(b, 0, b.mul(b.gy(), b.mul(e, b.op("pow", {a, em1}))));
    }
    if (b.wants(1)) {
      const ValueId nonzero = b.op("ne", {a, b.scalar_like(0.0, a)});
      out[1] = to(b, 1, b.masked(nonzero, b.mul(b.mul(b.gy(), b.y()), b.op("log", {a}))));
    }
    return out;
  };
  // maximum/minimum: the larger (smaller) operand takes gy; a tie splits it evenly (PyTorch's).
  for (const char* op : {"maximum", "minimum"}) {
    const bool is_max = std::string(op) == "maximum";
    t[op] = [to, is_max](GradBuilder& b) -> Grads {
      const ValueId a = b.x(0), c = b.x(1);
      const ValueId half_tie = b.times(b.as_number(b.op("eq", {a, c}), b.gy()), 0.5);
      auto share = [&](ValueId l, ValueId r) {
        return b.mul(b.gy(),
                     b.add(b.as_number(b.op(is_max ? "gt" : "lt", {l, r}), b.gy()), half_tie));
      };
      return {b.wants(0) ? to(b, 0, share(a, c)) : -1, b.wants(1) ? to(b, 1, share(c, a)) : -1};
    };
  }
  t["where"] = [to](GradBuilder& b) -> Grads {
    const ValueId c = b.x(0);
    const ValueId zero = b.scalar_like(0.0, b.gy());
    return {-1, b.wants(1) ? to(b, 1, b.op("where", {c, b.gy(), zero})) : -1,
            b.wants(2) ? to(b, 2, b.op("where", {c, zero, b.gy()})) : -1};
  };
}

}  // namespace

void add_elementwise_grads(GradTable& t) {
  add_unary_math(t);
  add_activations(t);
  add_binary(t);
}

}  // namespace crucible::autodiff
