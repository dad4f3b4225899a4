// crucible's ops in ATen (see aten_ops.h). Each op is one entry of the table below with its eager
// call and its TorchScript expression side by side. Operands are first cast to the dtype crucible
// computes in (its result type), so ATen's own promotion never decides a result; where ATen's
// semantics differ from crucible's on some values (float -> int casts of NaN and out-of-range
// values, integer arange with fractional steps, integer clamp bounds), the entry computes
// crucible's result with other ATen calls. Float rounding is ATen's own (SLEEF, its summation
// order, its bf16 kernels): that is what a PyTorch user gets, and what the accuracy rule judges.
#include "aten_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "aten_bridge.h"
#include "aten_entry.h"
#include "crucible/ir/type_rules.h"
#include "crucible/plugin_api.h"

namespace crucible::libtorch {
namespace aten {

// --- eager helpers ---------------------------------------------------------------------------

at::Tensor as(const at::Tensor& x, DType t) {
  const at::ScalarType s = to_aten(t);
  return x.scalar_type() == s ? x : x.to(s);
}

std::vector<int64_t> pair(const Attrs& a, const char* name, int64_t fallback) {
  if (!a.has(name)) return {fallback, fallback};
  const std::vector<int64_t>& v = a.get_ints(name);
  if (v.empty()) return {fallback, fallback};
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : std::vector<int64_t>{v[0], v[1]};
}

// Reduction dims: absent or [] means every dim.
std::vector<int64_t> reduce_dims(const Ctx& c) {
  std::vector<int64_t> dims = c.a().has("dims") ? c.a().get_ints("dims") : std::vector<int64_t>{};
  if (dims.empty()) {
    const int64_t rank = static_cast<int64_t>(c.g.value(c.n.operands[0]).type.shape.size());
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  return dims;
}

// A clamp bound for an integer tensor: saturated to the dtype's range, then truncated toward
// zero, as crucible's kernel does (ATen 1.13 would promote the tensor to f32 for a float bound).
int64_t int_bound(double b, DType t) {
  double lo = 0, hi = 255;
  if (t == DType::kI32) {
    lo = std::numeric_limits<int32_t>::min();
    hi = std::numeric_limits<int32_t>::max();
  } else if (t == DType::kI64) {
    lo = -9223372036854775808.0;
    hi = 9223372036854774784.0;  // the largest double below 2^63
  }
  return static_cast<int64_t>(std::trunc(std::min(std::max(b, lo), hi)));
}

// float -> integer as crucible converts: NaN -> 0, |x| >= 9.2e18 (and inf) -> INT64_MIN, else
// truncate and wrap to the width. ATen's static_cast gives INT_MIN for NaN and overflow on x86.
at::Tensor float_to_int(const at::Tensor& x, DType to) {
  const at::Tensor d = x.to(at::kDouble);
  const at::Tensor big = d.abs() >= 9.2e18;
  at::Tensor i = at::where(at::isnan(d) | big, at::zeros_like(d), d).to(at::kLong);
  i = at::where(big, at::full_like(i, std::numeric_limits<int64_t>::min()), i);
  return i.to(to_aten(to));
}

// A double tensor in `to`: integers truncated then wrapped (through i64), as crucible converts.
at::Tensor from_double(const at::Tensor& d, DType to) {
  return is_integral(to) ? d.to(at::kLong).to(to_aten(to)) : d.to(to_aten(to));
}

// --- TorchScript helpers ---------------------------------------------------------------------

// A dtype in TorchScript source: the ScalarType's number (`torch.float32` is a Python attribute
// that C++'s TorchScript resolver does not know; the schemas take ScalarType as an int).
std::string sdtype(DType t) { return std::to_string(static_cast<int>(to_aten(t))); }

std::string sas(const Ctx& c, size_t k, const std::string& x, DType t) {
  return c.operand(k) == t ? x : fmt::format("{}.to({})", x, sdtype(t));
}

std::string sfloat(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  return fmt::format("{:.17g}", v) + (std::trunc(v) == v && std::abs(v) < 1e16 ? ".0" : "");
}

// An int list literal; an empty one is written as a slice of a one-element list, since
// TorchScript cannot type a bare [] (and C++'s resolver has no torch.jit.annotate).
std::string sints(const std::vector<int64_t>& v) {
  return v.empty() ? "[0][:0]" : fmt::format("[{}]", fmt::join(v, ", "));
}

std::string sbool(bool b) { return b ? "True" : "False"; }

// --- the table -------------------------------------------------------------------------------

// Binary ops whose operands are cast to the result dtype first (crucible's as_operand).
Entry binary(const char* name, at::Tensor (*fn)(const at::Tensor&, const at::Tensor&)) {
  return {[fn](const Ctx& c, const std::vector<at::Tensor>& x) {
            return fn(as(x[0], c.out), as(x[1], c.out));
          },
          [name](const Ctx& c, const std::vector<std::string>& x) {
            return fmt::format("torch.{}({}, {})", name, sas(c, 0, x[0], c.out),
                               sas(c, 1, x[1], c.out));
          }};
}

// Comparisons: both operands in their common dtype, a bool result.
Entry compare(const char* name, at::Tensor (*fn)(const at::Tensor&, const at::Tensor&)) {
  auto common = [](const Ctx& c) {
    const TensorType t[] = {c.g.value(c.n.operands[0]).type, c.g.value(c.n.operands[1]).type};
    return result_type(t);
  };
  return {[fn, common](const Ctx& c, const std::vector<at::Tensor>& x) {
            const DType t = common(c);
            return fn(as(x[0], t), as(x[1], t));
          },
          [name, common](const Ctx& c, const std::vector<std::string>& x) {
            const DType t = common(c);
            return fmt::format("torch.{}({}, {})", name, sas(c, 0, x[0], t), sas(c, 1, x[1], t));
          }};
}

// Unary ops computed in the result dtype (floats keep theirs; integers and bool go to f32 for
// the float-valued ones; neg and abs keep the input's).
Entry unary(const char* name, at::Tensor (*fn)(const at::Tensor&)) {
  return {[fn](const Ctx& c, const std::vector<at::Tensor>& x) { return fn(as(x[0], c.out)); },
          [name](const Ctx& c, const std::vector<std::string>& x) {
            return fmt::format("torch.{}({})", name, sas(c, 0, x[0], c.out));
          }};
}

// The functional activations (not in the torch namespace of TorchScript's builtins).
Entry activation(const char* name, at::Tensor (*fn)(const at::Tensor&)) {
  return {[fn](const Ctx& c, const std::vector<at::Tensor>& x) { return fn(as(x[0], c.out)); },
          [name](const Ctx& c, const std::vector<std::string>& x) {
            return fmt::format("torch.{}({})", name, sas(c, 0, x[0], c.out));
          }};
}

}  // namespace aten

namespace {

using namespace aten;

at::Tensor relu(const at::Tensor& x) { return at::relu(x); }
at::Tensor silu(const at::Tensor& x) { return at::silu(x); }
at::Tensor hardswish(const at::Tensor& x) { return at::hardswish(x); }
at::Tensor hardsigmoid(const at::Tensor& x) { return at::hardsigmoid(x); }

// A table, not logic: one entry per op (its ATen call and TorchScript expression), so an op's
// mapping is found by its name in one place.
const Table& table() {
  static const Table t = [] {
    Table m;
    // Elementwise arithmetic and comparisons.
    m["add"] =
        binary("add", [](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); });
    m["sub"] =
        binary("sub", [](const at::Tensor& a, const at::Tensor& b) { return at::sub(a, b); });
    m["mul"] =
        binary("mul", [](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); });
    m["div"] =
        binary("div", [](const at::Tensor& a, const at::Tensor& b) { return at::div(a, b); });
    m["maximum"] = binary(
        "maximum", [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); });
    m["minimum"] = binary(
        "minimum", [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); });
    m["pow"] =
        binary("pow", [](const at::Tensor& a, const at::Tensor& b) { return at::pow(a, b); });
    m["eq"] = compare("eq", [](const at::Tensor& a, const at::Tensor& b) { return at::eq(a, b); });
    m["ne"] = compare("ne", [](const at::Tensor& a, const at::Tensor& b) { return at::ne(a, b); });
    m["lt"] = compare("lt", [](const at::Tensor& a, const at::Tensor& b) { return at::lt(a, b); });
    m["le"] = compare("le", [](const at::Tensor& a, const at::Tensor& b) { return at::le(a, b); });
    m["gt"] = compare("gt", [](const at::Tensor& a, const at::Tensor& b) { return at::gt(a, b); });
    m["ge"] = compare("ge", [](const at::Tensor& a, const at::Tensor& b) { return at::ge(a, b); });
    m["where"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                    return at::where(x[0], as(x[1], c.out), as(x[2], c.out));
                  },
                  [](const Ctx& c, const std::vector<std::string>& x) {
                    return fmt::format("torch.where({}, {}, {})", x[0], sas(c, 1, x[1], c.out),
                                       sas(c, 2, x[2], c.out));
                  }};
    // Unary.
    m["neg"] = unary("neg", [](const at::Tensor& x) { return at::neg(x); });
    m["abs"] = unary("abs", [](const at::Tensor& x) { return at::abs(x); });
    m["relu"] = unary("relu", relu);
    m["exp"] = unary("exp", [](const at::Tensor& x) { return at::exp(x); });
    m["log"] = unary("log", [](const at::Tensor& x) { return at::log(x); });
    m["sqrt"] = unary("sqrt", [](const at::Tensor& x) { return at::sqrt(x); });
    m["rsqrt"] = unary("rsqrt", [](const at::Tensor& x) { return at::rsqrt(x); });
    m["sin"] = unary("sin", [](const at::Tensor& x) { return at::sin(x); });
    m["cos"] = unary("cos", [](const at::Tensor& x) { return at::cos(x); });
    m["tanh"] = unary("tanh", [](const at::Tensor& x) { return at::tanh(x); });
    m["sigmoid"] = unary("sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); });
    m["erf"] = unary("erf", [](const at::Tensor& x) { return at::erf(x); });
    m["reciprocal"] = unary("reciprocal", [](const at::Tensor& x) { return at::reciprocal(x); });
    m["silu"] = activation("silu", silu);
    m["hardswish"] = activation("hardswish", hardswish);
    m["hardsigmoid"] = activation("hardsigmoid", hardsigmoid);
    m["gelu"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                   return at::gelu(as(x[0], c.out), c.a().get_string_or("approximate", "none"));
                 },
                 [](const Ctx& c, const std::vector<std::string>& x) {
                   return fmt::format("torch.gelu({}, approximate=\"{}\")", sas(c, 0, x[0], c.out),
                                      c.a().get_string_or("approximate", "none"));
                 }};
    m["clamp"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                    auto bound = [&](const char* name) -> c10::optional<at::Scalar> {
                      const std::optional<double> b = c.a().get_optional_float(name);
                      if (!b) return c10::nullopt;
                      if (is_floating(c.out)) return at::Scalar(*b);
                      return at::Scalar(int_bound(*b, c.out));
                    };
                    return at::clamp(x[0], bound("min"), bound("max"));
                  },
                  [](const Ctx& c, const std::vector<std::string>& x) {
                    auto bound = [&](const char* name) -> std::string {
                      const std::optional<double> b = c.a().get_optional_float(name);
                      if (!b) return "None";
                      return is_floating(c.out) ? sfloat(*b) : std::to_string(int_bound(*b, c.out));
                    };
                    const std::string lo = bound("min"), hi = bound("max");
                    // PyTorch 1.13's optimize_for_inference rewrites aten::clamp after a
                    // convolution into prim::MKLDNNClamp_, which gives wrong values with both
                    // bounds and asserts with one (tests/libtorch_test.cpp shows both); hardtanh,
                    // clamp_min and clamp_max are the same function for floats and stay correct.
                    if (c.style.native_clamp) {
                      return is_floating(c.out) && lo != "None" && hi != "None"
                                 ? fmt::format("torch.hardtanh({}, {}, {})", x[0], lo, hi)
                                 : fmt::format("torch.clamp({}, {}, {})", x[0], lo, hi);
                    }
                    // A NaN bound keeps the plain form: clamp_min/clamp_max propagate a NaN
                    // bound where clamp ignores a lone one (crucible's rule).
                    const bool nan_bound =
                        lo.find("nan") != std::string::npos || hi.find("nan") != std::string::npos;
                    if (is_floating(c.out) && !nan_bound && lo != "None" && hi != "None")
                      return fmt::format("torch.clamp_max(torch.clamp_min({}, {}), {})", x[0], lo,
                                         hi);
                    if (is_floating(c.out) && !nan_bound && hi == "None")
                      return fmt::format("torch.clamp_min({}, {})", x[0], lo);
                    if (is_floating(c.out) && !nan_bound && lo == "None")
                      return fmt::format("torch.clamp_max({}, {})", x[0], hi);
                    return fmt::format("torch.clamp({}, {}, {})", x[0], lo, hi);
                  }};
    m["cast"] = {
        [](const Ctx& c, const std::vector<at::Tensor>& x) {
          if (is_floating(c.operand(0)) && is_integral(c.out)) return float_to_int(x[0], c.out);
          return as(x[0], c.out);
        },
        [](const Ctx& c, const std::vector<std::string>& x) {
          if (!is_floating(c.operand(0)) || !is_integral(c.out)) return sas(c, 0, x[0], c.out);
          const std::string d = x[0] + ".to(" + sdtype(DType::kF64) + ")";
          const std::string big = fmt::format("({}.abs() >= 9.2e18)", d);
          const std::string i =
              fmt::format("torch.where(torch.isnan({0}) | {1}, torch.zeros_like({0}), {0}).to({2})",
                          d, big, sdtype(DType::kI64));
          return fmt::format(
              "torch.where({0}, torch.full_like({1}, -9223372036854775807 - 1), {1}).to({2})", big,
              i, sdtype(c.out));
        }};
    // Shapes and layout.
    m["reshape"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                      return at::reshape(x[0], c.a().get_ints("shape"));
                    },
                    [](const Ctx& c, const std::vector<std::string>& x) {
                      return fmt::format("torch.reshape({}, {})", x[0],
                                         sints(c.a().get_ints("shape")));
                    }};
    m["permute"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                      return at::permute(x[0], c.a().get_ints("dims"));
                    },
                    [](const Ctx& c, const std::vector<std::string>& x) {
                      return fmt::format("torch.permute({}, {})", x[0],
                                         sints(c.a().get_ints("dims")));
                    }};
    m["transpose"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                        if (x[0].dim() == 0) return x[0];
                        return at::transpose(x[0], c.a().get_int("dim0"), c.a().get_int("dim1"));
                      },
                      [](const Ctx& c, const std::vector<std::string>& x) {
                        if (c.g.value(c.n.operands[0]).type.shape.empty()) return x[0];
                        return fmt::format("torch.transpose({}, {}, {})", x[0],
                                           c.a().get_int("dim0"), c.a().get_int("dim1"));
                      }};
    m["expand"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                     return x[0].expand(c.a().get_ints("shape"));
                   },
                   [](const Ctx& c, const std::vector<std::string>& x) {
                     return fmt::format("{}.expand({})", x[0], sints(c.a().get_ints("shape")));
                   }};
    m["slice"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                    return at::slice(x[0], c.a().get_int("dim"), c.a().get_int_or("start", 0),
                                     c.a().get_int_or("end", std::numeric_limits<int64_t>::max()),
                                     c.a().get_int_or("step", 1));
                  },
                  [](const Ctx& c, const std::vector<std::string>& x) {
                    return fmt::format("torch.slice({}, {}, {}, {}, {})", x[0],
                                       c.a().get_int("dim"), c.a().get_int_or("start", 0),
                                       c.a().get_int_or("end", std::numeric_limits<int64_t>::max()),
                                       c.a().get_int_or("step", 1));
                  }};
    m["squeeze"] = {
        [](const Ctx& c, const std::vector<at::Tensor>& x) {
          if (x[0].dim() == 0) return x[0];
          return c.a().has("dim") ? at::squeeze(x[0], c.a().get_int("dim")) : at::squeeze(x[0]);
        },
        [](const Ctx& c, const std::vector<std::string>& x) {
          if (c.g.value(c.n.operands[0]).type.shape.empty()) return x[0];
          return c.a().has("dim") ? fmt::format("torch.squeeze({}, {})", x[0], c.a().get_int("dim"))
                                  : fmt::format("torch.squeeze({})", x[0]);
        }};
    m["unsqueeze"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                        return at::unsqueeze(x[0], c.a().get_int("dim"));
                      },
                      [](const Ctx& c, const std::vector<std::string>& x) {
                        return fmt::format("torch.unsqueeze({}, {})", x[0], c.a().get_int("dim"));
                      }};
    m["cat"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                  std::vector<at::Tensor> parts;
                  for (const at::Tensor& t : x) parts.push_back(as(t, c.out));
                  return at::cat(parts, c.a().get_int_or("dim", 0));
                },
                [](const Ctx& c, const std::vector<std::string>& x) {
                  std::vector<std::string> parts;
                  for (size_t k = 0; k < x.size(); ++k) parts.push_back(sas(c, k, x[k], c.out));
                  return fmt::format("torch.cat([{}], {})", fmt::join(parts, ", "),
                                     c.a().get_int_or("dim", 0));
                }};
    m["full"] = {[](const Ctx& c, const std::vector<at::Tensor>&) {
                   return at::full(c.a().get_ints("shape"), at::Scalar(c.a().get_float("value")),
                                   at::TensorOptions().dtype(to_aten(c.out)));
                 },
                 [](const Ctx& c, const std::vector<std::string>&) {
                   return fmt::format("torch.full({}, {}, dtype={})",
                                      sints(c.a().get_ints("shape")),
                                      sfloat(c.a().get_float("value")), sdtype(c.out));
                 }};
    // arange computed in double (start + i * step) and converted, as crucible does: ATen 1.13
    // truncates an integer arange's start and step first.
    m["arange"] = {[](const Ctx& c, const std::vector<at::Tensor>&) {
                     const int64_t n = c.g.value(c.n.output).type.shape.at(0);
                     return from_double(at::arange(n, at::TensorOptions().dtype(at::kDouble)) *
                                                c.a().get_float_or("step", 1) +
                                            c.a().get_float_or("start", 0),
                                        c.out);
                   },
                   [](const Ctx& c, const std::vector<std::string>&) {
                     const int64_t n = c.g.value(c.n.output).type.shape.at(0);
                     const std::string d =
                         fmt::format("(torch.arange({}, dtype={}) * {} + {})", n,
                                     sdtype(DType::kF64), sfloat(c.a().get_float_or("step", 1)),
                                     sfloat(c.a().get_float_or("start", 0)));
                     return is_integral(c.out)
                                ? d + ".to(" + sdtype(DType::kI64) + ").to(" + sdtype(c.out) + ")"
                                : d + ".to(" + sdtype(c.out) + ")";
                   }};
    // Reductions.
    m["sum"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                  if (x[0].dim() == 0) return as(x[0], c.out).clone();
                  return as(at::sum(x[0], reduce_dims(c), c.a().get_bool_or("keepdim", false)),
                            c.out);
                },
                [](const Ctx& c, const std::vector<std::string>& x) {
                  if (c.g.value(c.n.operands[0]).type.shape.empty())
                    return sas(c, 0, x[0], c.out) + ".clone()";
                  return fmt::format("torch.sum({}, {}, {}).to({})", x[0], sints(reduce_dims(c)),
                                     sbool(c.a().get_bool_or("keepdim", false)), sdtype(c.out));
                }};
    auto reduction = [](const char* name,
                        at::Tensor (*fn)(const at::Tensor&, at::IntArrayRef, bool)) -> Entry {
      return {[fn](const Ctx& c, const std::vector<at::Tensor>& x) {
                if (x[0].dim() == 0) return x[0].clone();
                return fn(x[0], reduce_dims(c), c.a().get_bool_or("keepdim", false));
              },
              [name](const Ctx& c, const std::vector<std::string>& x) {
                if (c.g.value(c.n.operands[0]).type.shape.empty()) return x[0] + ".clone()";
                return fmt::format("torch.{}({}, {}, {})", name, x[0], sints(reduce_dims(c)),
                                   sbool(c.a().get_bool_or("keepdim", false)));
              }};
    };
    m["mean"] = reduction(
        "mean", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::mean(x, d, k); });
    m["amax"] = reduction(
        "amax", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amax(x, d, k); });
    m["amin"] = reduction(
        "amin", [](const at::Tensor& x, at::IntArrayRef d, bool k) { return at::amin(x, d, k); });
    m["var"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                  const std::vector<int64_t> dims = reduce_dims(c);
                  return at::var(x[0], at::OptionalIntArrayRef(dims),
                                 c10::optional<int64_t>(c.a().get_int_or("correction", 1)),
                                 c.a().get_bool_or("keepdim", false));
                },
                [](const Ctx& c, const std::vector<std::string>& x) {
                  return fmt::format("torch.var({}, {}, correction={}, keepdim={})", x[0],
                                     sints(reduce_dims(c)), c.a().get_int_or("correction", 1),
                                     sbool(c.a().get_bool_or("keepdim", false)));
                }};
    m["softmax"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                      return at::softmax(x[0], c.a().get_int("dim"));
                    },
                    [](const Ctx& c, const std::vector<std::string>& x) {
                      return fmt::format("torch.softmax({}, {})", x[0], c.a().get_int("dim"));
                    }};
    m["log_softmax"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                          return at::log_softmax(x[0], c.a().get_int("dim"));
                        },
                        [](const Ctx& c, const std::vector<std::string>& x) {
                          return fmt::format("torch.log_softmax({}, {})", x[0],
                                             c.a().get_int("dim"));
                        }};
    m["layer_norm"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                         const c10::optional<at::Tensor> w =
                             x.size() > 1 ? c10::optional<at::Tensor>(x[1]) : c10::nullopt;
                         const c10::optional<at::Tensor> b =
                             x.size() > 2 ? c10::optional<at::Tensor>(x[2]) : c10::nullopt;
                         return at::layer_norm(x[0], c.a().get_ints("normalized_shape"), w, b,
                                               c.a().get_float_or("eps", 1e-5));
                       },
                       [](const Ctx& c, const std::vector<std::string>& x) {
                         return fmt::format("torch.layer_norm({}, {}, {}, {}, {})", x[0],
                                            sints(c.a().get_ints("normalized_shape")),
                                            x.size() > 1 ? x[1] : "None",
                                            x.size() > 2 ? x[2] : "None",
                                            sfloat(c.a().get_float_or("eps", 1e-5)));
                       }};
    // Linear algebra.
    m["matmul"] = {
        [](const Ctx&, const std::vector<at::Tensor>& x) { return at::matmul(x[0], x[1]); },
        [](const Ctx&, const std::vector<std::string>& x) {
          return fmt::format("torch.matmul({}, {})", x[0], x[1]);
        }};
    m["linear"] = {[](const Ctx&, const std::vector<at::Tensor>& x) {
                     return at::linear(
                         x[0], x[1], x.size() > 2 ? c10::optional<at::Tensor>(x[2]) : c10::nullopt);
                   },
                   [](const Ctx&, const std::vector<std::string>& x) {
                     return fmt::format("torch.linear({}, {}, {})", x[0], x[1],
                                        x.size() > 2 ? x[2] : "None");
                   }};
    m["addmm"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                    return at::addmm(x[0], x[1], x[2], c.a().get_float_or("beta", 1),
                                     c.a().get_float_or("alpha", 1));
                  },
                  [](const Ctx& c, const std::vector<std::string>& x) {
                    return fmt::format("torch.addmm({}, {}, {}, beta={}, alpha={})", x[0], x[1],
                                       x[2], sfloat(c.a().get_float_or("beta", 1)),
                                       sfloat(c.a().get_float_or("alpha", 1)));
                  }};
    m["embedding"] = {
        [](const Ctx&, const std::vector<at::Tensor>& x) { return at::embedding(x[0], x[1]); },
        [](const Ctx&, const std::vector<std::string>& x) {
          return fmt::format("torch.embedding({}, {})", x[0], x[1]);
        }};
    // Vision.
    m["conv2d"] = {
        [](const Ctx& c, const std::vector<at::Tensor>& x) {
          return at::conv2d(x[0], x[1],
                            x.size() > 2 ? c10::optional<at::Tensor>(x[2]) : c10::nullopt,
                            pair(c.a(), "stride", 1), pair(c.a(), "padding", 0),
                            pair(c.a(), "dilation", 1), c.a().get_int_or("groups", 1));
        },
        [](const Ctx& c, const std::vector<std::string>& x) {
          return fmt::format("torch.conv2d({}, {}, {}, {}, {}, {}, {})", x[0], x[1],
                             x.size() > 2 ? x[2] : "None", sints(pair(c.a(), "stride", 1)),
                             sints(pair(c.a(), "padding", 0)), sints(pair(c.a(), "dilation", 1)),
                             c.a().get_int_or("groups", 1));
        }};
    // A pool's stride defaults to its kernel size (also when given as []).
    auto stride = [](const Ctx& c) {
      const std::vector<int64_t> k = pair(c.a(), "kernel_size", 1);
      std::vector<int64_t> s = pair(c.a(), "stride", -1);
      return s[0] < 0 ? k : s;
    };
    m["max_pool2d"] = {
        [stride](const Ctx& c, const std::vector<at::Tensor>& x) {
          return at::max_pool2d(x[0], pair(c.a(), "kernel_size", 1), stride(c),
                                pair(c.a(), "padding", 0), pair(c.a(), "dilation", 1),
                                c.a().get_bool_or("ceil_mode", false));
        },
        [stride](const Ctx& c, const std::vector<std::string>& x) {
          return fmt::format("torch.max_pool2d({}, {}, {}, {}, {}, {})", x[0],
                             sints(pair(c.a(), "kernel_size", 1)), sints(stride(c)),
                             sints(pair(c.a(), "padding", 0)), sints(pair(c.a(), "dilation", 1)),
                             sbool(c.a().get_bool_or("ceil_mode", false)));
        }};
    m["avg_pool2d"] = {[stride](const Ctx& c, const std::vector<at::Tensor>& x) {
                         return at::avg_pool2d(x[0], pair(c.a(), "kernel_size", 1), stride(c),
                                               pair(c.a(), "padding", 0),
                                               c.a().get_bool_or("ceil_mode", false),
                                               c.a().get_bool_or("count_include_pad", true));
                       },
                       [stride](const Ctx& c, const std::vector<std::string>& x) {
                         return fmt::format("torch.avg_pool2d({}, {}, {}, {}, {}, {})", x[0],
                                            sints(pair(c.a(), "kernel_size", 1)), sints(stride(c)),
                                            sints(pair(c.a(), "padding", 0)),
                                            sbool(c.a().get_bool_or("ceil_mode", false)),
                                            sbool(c.a().get_bool_or("count_include_pad", true)));
                       }};
    m["adaptive_avg_pool2d"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                                  return at::adaptive_avg_pool2d(x[0],
                                                                 pair(c.a(), "output_size", 1));
                                },
                                [](const Ctx& c, const std::vector<std::string>& x) {
                                  return fmt::format("torch.adaptive_avg_pool2d({}, {})", x[0],
                                                     sints(pair(c.a(), "output_size", 1)));
                                }};
    m["batch_norm"] = {[](const Ctx& c, const std::vector<at::Tensor>& x) {
                         return at::batch_norm(x[0], x[1], x[2], x[3], x[4], /*training=*/false,
                                               /*momentum=*/0.1, c.a().get_float_or("eps", 1e-5),
                                               /*cudnn_enabled=*/false);
                       },
                       [](const Ctx& c, const std::vector<std::string>& x) {
                         return fmt::format(
                             "torch.batch_norm({}, {}, {}, {}, {}, False, 0.1, {}, False)", x[0],
                             x[1], x[2], x[3], x[4], sfloat(c.a().get_float_or("eps", 1e-5)));
                       }};
    add_math_entries(m);
    add_index_entries(m);
    add_vision_entries(m);
    return m;
  }();
  return t;
}

const Entry& entry(const Node& n) {
  const auto it = table().find(n.op);
  if (it == table().end()) {
    throw plugin::CompileError(fmt::format("libtorch: op '{}' has no ATen mapping", n.op));
  }
  return it->second;
}

}  // namespace

void check_mappable(const Graph& g, const Node& n) {
  const Entry& e = entry(n);
  if (e.check) e.check(Ctx{g, n, g.value(n.output).type.dtype});
}

at::Tensor run_aten(const Graph& g, const Node& n, const std::vector<at::Tensor>& operands) {
  const Ctx c{g, n, g.value(n.output).type.dtype};
  at::Tensor r = entry(n).eager(c, operands);
  // Every entry must give crucible's result type: a mismatch is a mapping bug, said as one.
  const TensorType& want = g.value(n.output).type;
  if (r.scalar_type() != to_aten(want.dtype) ||
      !std::equal(r.sizes().begin(), r.sizes().end(), want.shape.begin(), want.shape.end())) {
    throw Error(fmt::format("libtorch: {} gave {}{} where crucible infers {}{}", n.op,
                            c10::toString(r.scalar_type()),
                            shape_str(std::vector<int64_t>(r.sizes().begin(), r.sizes().end())),
                            dtype_name(want.dtype), shape_str(want.shape)));
  }
  return r;
}

std::string script_expr(const Graph& g, const Node& n, const std::vector<std::string>& operands,
                        const ScriptStyle& style) {
  const Ctx c{g, n, g.value(n.output).type.dtype, style};
  return entry(n).script(c, operands);
}

}  // namespace crucible::libtorch
