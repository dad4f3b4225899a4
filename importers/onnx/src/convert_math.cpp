// Elementwise ONNX ops: unary and binary math, comparisons and logic, the variadic Max/Min/Sum/
// Mean, activations with attributes (decomposed into registry ops), Clip and Cast.
#include <fmt/format.h>

#include <cmath>

#include "converters.h"
#include "tensor_proto.h"

namespace crucible::onnx {

namespace {

Converter unary(std::string op) {
  return [op](Ctx& c, const NodeProto& n) { c.out(n, 0, c.op(op, {c.in(n, 0)})); };
}

Converter binary(std::string op) {
  return [op](Ctx& c, const NodeProto& n) { c.out(n, 0, c.op(op, {c.in(n, 0), c.in(n, 1)})); };
}

// Max, Min, Sum, Mean: a left fold over any number of broadcasting operands.
Converter variadic(std::string op, bool mean) {
  return [op, mean](Ctx& c, const NodeProto& n) {
    if (n.input_size() < 1) malformed("needs at least one input");
    Val acc = c.in(n, 0);
    for (int i = 1; i < n.input_size(); ++i) acc = c.op(op, {acc, c.in(n, i)});
    if (mean && n.input_size() > 1)
      acc = c.op("div", {acc, c.scalar(n.input_size(), acc.type.dtype)});
    c.out(n, 0, acc);
  };
}

// ONNX keeps the operand dtype where the registry's rule would promote (integer Div, Pow with an
// integer exponent): cast back.
Val keep_dtype(Ctx& c, Val v, DType dtype) {
  return v.type.dtype == dtype ? v : c.op("cast", {v}, {{"dtype", dtype}});
}

void div(Ctx& c, const NodeProto& n) {
  Val a = c.in(n, 0), b = c.in(n, 1);
  if (is_floating(a.type.dtype)) return c.out(n, 0, c.op("div", {a, b}));
  // Integer division truncates toward zero, in the integers themselves: through f64, int64
  // quotients above 2^53 were rounded (folded and at run time).
  c.out(n, 0, keep_dtype(c, c.op("trunc_div", {a, b}), a.type.dtype));
}

void pow(Ctx& c, const NodeProto& n) {
  Val a = c.in(n, 0), b = c.in(n, 1);
  if (b.type.dtype != a.type.dtype) b = c.op("cast", {b}, {{"dtype", a.type.dtype}});
  c.out(n, 0, keep_dtype(c, c.op("pow", {a, b}), a.type.dtype));
}

void mod(Ctx& c, const NodeProto& n) {
  c.out(n, 0, c.op("mod", {c.in(n, 0), c.in(n, 1)}, {{"fmod", attr_int(n, "fmod", 0) != 0}}));
}

void is_inf(Ctx& c, const NodeProto& n) {
  c.out(n, 0,
        c.op("isinf", {c.in(n, 0)},
             {{"detect_positive", attr_int(n, "detect_positive", 1) != 0},
              {"detect_negative", attr_int(n, "detect_negative", 1) != 0}}));
}

// where(x < 0, neg_branch, x), the shape of LeakyRelu, Elu and PRelu.
Val where_negative(Ctx& c, const Val& x, const Val& neg_branch, const Val& pos) {
  return c.op("where", {c.op("lt", {x, c.scalar(0, x.type.dtype)}), neg_branch, pos});
}

void leaky_relu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  Val s = c.op("mul", {x, c.scalar(attr_float(n, "alpha", 0.01), x.type.dtype)});
  c.out(n, 0, where_negative(c, x, s, x));
}

void prelu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0), slope = c.in(n, 1);
  // Before opset 7 a 1-d slope is per channel (dim 1), not numpy-broadcast from the right.
  if (c.opset() < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.type.shape[0] != 1) {
    std::vector<int64_t> shape(static_cast<size_t>(x.rank() - 1), 1);
    shape[0] = slope.type.shape[0];
    slope = c.op("reshape", {slope}, {{"shape", shape}});
  }
  c.out(n, 0, where_negative(c, x, c.op("mul", {x, slope}), x));
}

Val expm1_scaled(Ctx& c, const Val& x, double alpha) {
  const DType t = x.type.dtype;
  return c.op("mul", {c.op("sub", {c.op("exp", {x}), c.scalar(1, t)}), c.scalar(alpha, t)});
}

void elu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0, where_negative(c, x, expm1_scaled(c, x, attr_float(n, "alpha", 1.0)), x));
}

void selu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType t = x.type.dtype;
  const double alpha = attr_float(n, "alpha", 1.67326319217681884765625);
  const double gamma = attr_float(n, "gamma", 1.05070102214813232421875);
  Val neg = expm1_scaled(c, x, alpha);
  Val y = c.op("where", {c.op("le", {x, c.scalar(0, t)}), neg, x});
  c.out(n, 0, c.op("mul", {y, c.scalar(gamma, t)}));
}

void celu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType t = x.type.dtype;
  const double alpha = attr_float(n, "alpha", 1.0);
  Val e = expm1_scaled(c, c.op("div", {x, c.scalar(alpha, t)}), alpha);
  c.out(n, 0,
        c.op("add", {c.op("maximum", {x, c.scalar(0, t)}), c.op("minimum", {e, c.scalar(0, t)})}));
}

void thresholded_relu(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType t = x.type.dtype;
  Val keep = c.op("gt", {x, c.scalar(attr_float(n, "alpha", 1.0), t)});
  c.out(n, 0, c.op("where", {keep, x, c.scalar(0, t)}));
}

void softplus(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  c.out(n, 0, c.op("log", {c.op("add", {c.op("exp", {x}), c.scalar(1, x.type.dtype)})}));
}

void softsign(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  Val d = c.op("add", {c.op("abs", {x}), c.scalar(1, x.type.dtype)});
  c.out(n, 0, c.op("div", {x, d}));
}

void hard_sigmoid(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType t = x.type.dtype;
  Val y = c.op("add", {c.op("mul", {x, c.scalar(attr_float(n, "alpha", 0.2), t)}),
                       c.scalar(attr_float(n, "beta", 0.5), t)});
  c.out(n, 0, c.op("clamp", {y}, {{"min", 0.0}, {"max", 1.0}}));
}

void shrink(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType t = x.type.dtype;
  const double lambd = attr_float(n, "lambd", 0.5), bias = attr_float(n, "bias", 0.0);
  Val hi = c.op("where", {c.op("gt", {x, c.scalar(lambd, t)}), c.op("sub", {x, c.scalar(bias, t)}),
                          c.scalar(0, t)});
  c.out(n, 0,
        c.op("where",
             {c.op("lt", {x, c.scalar(-lambd, t)}), c.op("add", {x, c.scalar(bias, t)}), hi}));
}

// A scalar bound of Clip: an attribute before opset 11, an optional input after.
std::optional<Val> clip_bound(Ctx& c, const NodeProto& n, int input, const char* attr) {
  if (c.opset() < 11) {
    if (!find_attr(n, attr)) return std::nullopt;
    return c.scalar(attr_float(n, attr, 0), c.in(n, 0).type.dtype);
  }
  return c.opt_in(n, input);
}

// Clip on floats with constant bounds is one clamp, as PyTorch exports ReLU6 (NaN stays NaN, and
// a lower bound above the upper one gives the upper, as max then min do), so a packed
// convolution absorbs it; other bounds are a maximum and a minimum.
void clip(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const std::optional<Val> lo = clip_bound(c, n, 1, "min"), hi = clip_bound(c, n, 2, "max");
  auto constant_bound = [](const std::optional<Val>& b) {
    return !b || (b->is_const() && b->constant.numel() == 1 && !std::isnan(b->constant.get(0)));
  };
  if (is_floating(x.type.dtype) && (lo || hi) && constant_bound(lo) && constant_bound(hi)) {
    Attrs bounds;
    if (lo) bounds.set("min", lo->constant.get(0));
    if (hi) bounds.set("max", hi->constant.get(0));
    c.out(n, 0, c.op("clamp", {x}, std::move(bounds)));
    return;
  }
  if (lo) x = c.op("maximum", {x, *lo});
  if (hi) x = c.op("minimum", {x, *hi});
  c.out(n, 0, x);
}

void cast(Ctx& c, const NodeProto& n) {
  const int64_t to = attr_int(n, "to", 0);
  auto dtype = dtype_of(static_cast<int32_t>(to));
  if (!dtype)
    unsupported(fmt::format("cast to {} not supported", onnx_type_name(static_cast<int32_t>(to))));
  Val x = c.in(n, 0);
  c.out(n, 0, x.type.dtype == *dtype ? x : c.op("cast", {x}, {{"dtype", *dtype}}));
}

void cast_like(Ctx& c, const NodeProto& n) {
  Val x = c.in(n, 0);
  const DType to = c.in(n, 1).type.dtype;
  c.out(n, 0, x.type.dtype == to ? x : c.op("cast", {x}, {{"dtype", to}}));
}

}  // namespace

void add_math_converters(ConverterTable& t) {
  const std::pair<const char*, const char*> kUnary[] = {
      {"Abs", "abs"},         {"Neg", "neg"},
      {"Exp", "exp"},         {"Log", "log"},
      {"Sqrt", "sqrt"},       {"Reciprocal", "reciprocal"},
      {"Sin", "sin"},         {"Cos", "cos"},
      {"Tan", "tan"},         {"Asin", "asin"},
      {"Acos", "acos"},       {"Atan", "atan"},
      {"Sinh", "sinh"},       {"Cosh", "cosh"},
      {"Asinh", "asinh"},     {"Acosh", "acosh"},
      {"Atanh", "atanh"},     {"Tanh", "tanh"},
      {"Sigmoid", "sigmoid"}, {"Erf", "erf"},
      {"Relu", "relu"},       {"Floor", "floor"},
      {"Ceil", "ceil"},       {"Round", "round"},
      {"Sign", "sign"},       {"IsNaN", "isnan"},
      {"Not", "logical_not"}, {"HardSwish", "hardswish"}};
  for (const auto& [onnx_op, op] : kUnary) t[onnx_op] = unary(op);
  const std::pair<const char*, const char*> kBinary[] = {
      {"Add", "add"},         {"Sub", "sub"},       {"Mul", "mul"},        {"Equal", "eq"},
      {"Less", "lt"},         {"Greater", "gt"},    {"LessOrEqual", "le"}, {"GreaterOrEqual", "ge"},
      {"And", "logical_and"}, {"Or", "logical_or"}, {"Xor", "logical_xor"}};
  for (const auto& [onnx_op, op] : kBinary) t[onnx_op] = binary(op);
  t["Max"] = variadic("maximum", false);
  t["Min"] = variadic("minimum", false);
  t["Sum"] = variadic("add", false);
  t["Mean"] = variadic("add", true);
  t["Div"] = div;
  t["Pow"] = pow;
  t["Mod"] = mod;
  t["IsInf"] = is_inf;
  t["LeakyRelu"] = leaky_relu;
  t["PRelu"] = prelu;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Celu"] = celu;
  t["ThresholdedRelu"] = thresholded_relu;
  t["Softplus"] = softplus;
  t["Softsign"] = softsign;
  t["HardSigmoid"] = hard_sigmoid;
  t["Shrink"] = shrink;
  t["Clip"] = clip;
  t["Cast"] = cast;
  t["CastLike"] = cast_like;
}

}  // namespace crucible::onnx
