// ATen entries of the elementwise ops added for ONNX import: rounding, sign, the inverse and
// hyperbolic trigonometry, isnan/isinf, logical_not/and/or/xor and mod, each as crucible computes.
#include <fmt/format.h>

#include "aten_bridge.h"
#include "aten_entry.h"

namespace crucible::libtorch::aten {

namespace {

using Fn1 = at::Tensor (*)(const at::Tensor&);
using Fn2 = at::Tensor (*)(const at::Tensor&, const at::Tensor&);

// floor, ceil, round: ATen's on floats; integers are kept as they are (a copy).
Entry rounding(const char* name, Fn1 fn) {
  return {[fn](const Ctx& c, const std::vector<at::Tensor>& x) {
            return is_floating(c.out) ? fn(x[0]) : x[0].clone();
          },
          [name](const Ctx& c, const std::vector<std::string>& x) {
            return is_floating(c.out) ? fmt::format("torch.{}({})", name, x[0]) : x[0] + ".clone()";
          }};
}

// torch.sign gives 0 for NaN; crucible (numpy, ONNX's reference) keeps the NaN.
Entry sign() {
  return {[](const Ctx& c, const std::vector<at::Tensor>& x) {
            return is_floating(c.out) ? at::where(at::isnan(x[0]), x[0], at::sign(x[0]))
                                      : at::sign(x[0]);
          },
          [](const Ctx& c, const std::vector<std::string>& x) {
            return is_floating(c.out)
                       ? fmt::format("torch.where(torch.isnan({0}), {0}, torch.sign({0}))", x[0])
                       : fmt::format("torch.sign({})", x[0]);
          }};
}

// isinf with ONNX's detect_positive / detect_negative; integers are never infinite.
Entry isinf() {
  auto which = [](const Ctx& c) -> std::string {
    const bool pos = c.a().get_bool_or("detect_positive", true),
               neg = c.a().get_bool_or("detect_negative", true);
    if (!is_floating(c.operand(0)) || (!pos && !neg)) return "";
    return pos && neg ? "isinf" : pos ? "isposinf" : "isneginf";
  };
  return {[which](const Ctx& c, const std::vector<at::Tensor>& x) {
            const std::string w = which(c);
            if (w.empty()) return at::zeros_like(x[0], at::kBool);
            return w == "isinf"      ? at::isinf(x[0])
                   : w == "isposinf" ? at::isposinf(x[0])
                                     : at::isneginf(x[0]);
          },
          [which](const Ctx& c, const std::vector<std::string>& x) {
            const std::string w = which(c);
            if (w.empty())
              return fmt::format("torch.zeros_like({}, dtype={})", x[0], sdtype(DType::kBool));
            return fmt::format("torch.{}({})", w, x[0]);
          }};
}

// Both operands as they are (any dtypes), a bool result.
Entry logical(const char* name, Fn2 fn) {
  return {[fn](const Ctx&, const std::vector<at::Tensor>& x) { return fn(x[0], x[1]); },
          [name](const Ctx&, const std::vector<std::string>& x) {
            return fmt::format("torch.{}({}, {})", name, x[0], x[1]);
          }};
}

// mod: torch.remainder (fmod=false) or torch.fmod in the result dtype. ATen refuses an integer
// divisor of 0 and traps on INT_MIN % -1; crucible gives 0 for both, so integer divisors 0 (and
// -1 for signed types) are replaced by 1 and their results by 0.
Entry mod() {
  return {[](const Ctx& c, const std::vector<at::Tensor>& x) {
            const at::Tensor a = as(x[0], c.out), b = as(x[1], c.out);
            const bool py = !c.a().get_bool_or("fmod", false);
            if (is_floating(c.out)) return py ? at::remainder(a, b) : at::fmod(a, b);
            at::Tensor bad = b == 0;
            if (c.out != DType::kU8) bad = bad | (b == -1);
            const at::Tensor safe = at::where(bad, at::ones_like(b), b);
            const at::Tensor r = py ? at::remainder(a, safe) : at::fmod(a, safe);
            return at::where(bad, at::zeros_like(r), r);
          },
          [](const Ctx& c, const std::vector<std::string>& x) {
            const std::string a = sas(c, 0, x[0], c.out), b = sas(c, 1, x[1], c.out);
            const char* fn = c.a().get_bool_or("fmod", false) ? "fmod" : "remainder";
            if (is_floating(c.out)) return fmt::format("torch.{}({}, {})", fn, a, b);
            const std::string bad = c.out == DType::kU8
                                        ? fmt::format("({} == 0)", b)
                                        : fmt::format("(({0} == 0) | ({0} == -1))", b);
            const std::string r = fmt::format(
                "torch.{}({}, torch.where({}, torch.ones_like({}), {}))", fn, a, bad, b, b);
            return fmt::format("torch.where({0}, torch.zeros_like({1}), {1})", bad, r);
          }};
}

// trunc_div: torch.div(rounding_mode='trunc') in the result dtype. ATen refuses an integer divisor
// of 0 and traps on INT_MIN / -1; crucible gives 0 for the first and the wrapped negation for a
// divisor of -1, so those divisors are replaced by 1 and their quotients chosen after.
Entry trunc_div() {
  return {[](const Ctx& c, const std::vector<at::Tensor>& x) {
            const at::Tensor a = as(x[0], c.out), b = as(x[1], c.out);
            if (is_floating(c.out)) return at::div(a, b, "trunc");
            const bool is_signed = c.out != DType::kU8;
            const at::Tensor fix = is_signed ? (b == 0) | (b == -1) : (b == 0);
            at::Tensor q = at::div(a, at::where(fix, at::ones_like(b), b), "trunc");
            if (is_signed) q = at::where(b == -1, at::neg(a), q);
            return at::where(b == 0, at::zeros_like(q), q);
          },
          [](const Ctx& c, const std::vector<std::string>& x) {
            const std::string a = sas(c, 0, x[0], c.out), b = sas(c, 1, x[1], c.out);
            if (is_floating(c.out))
              return fmt::format("torch.div({}, {}, rounding_mode='trunc')", a, b);
            const bool is_signed = c.out != DType::kU8;
            const std::string fix = is_signed ? fmt::format("(({0} == 0) | ({0} == -1))", b)
                                              : fmt::format("({} == 0)", b);
            std::string q = fmt::format(
                "torch.div({}, torch.where({}, torch.ones_like({}), {}), rounding_mode='trunc')", a,
                fix, b, b);
            if (is_signed) q = fmt::format("torch.where({} == -1, torch.neg({}), {})", b, a, q);
            return fmt::format("torch.where({0} == 0, torch.zeros_like({1}), {1})", b, q);
          }};
}

}  // namespace

void add_math_entries(Table& m) {
  m["floor"] = rounding("floor", [](const at::Tensor& x) { return at::floor(x); });
  m["ceil"] = rounding("ceil", [](const at::Tensor& x) { return at::ceil(x); });
  m["round"] = rounding("round", [](const at::Tensor& x) { return at::round(x); });  // half even
  m["sign"] = sign();
  m["tan"] = unary("tan", [](const at::Tensor& x) { return at::tan(x); });
  m["asin"] = unary("asin", [](const at::Tensor& x) { return at::asin(x); });
  m["acos"] = unary("acos", [](const at::Tensor& x) { return at::acos(x); });
  m["atan"] = unary("atan", [](const at::Tensor& x) { return at::atan(x); });
  m["sinh"] = unary("sinh", [](const at::Tensor& x) { return at::sinh(x); });
  m["cosh"] = unary("cosh", [](const at::Tensor& x) { return at::cosh(x); });
  m["asinh"] = unary("asinh", [](const at::Tensor& x) { return at::asinh(x); });
  m["acosh"] = unary("acosh", [](const at::Tensor& x) { return at::acosh(x); });
  m["atanh"] = unary("atanh", [](const at::Tensor& x) { return at::atanh(x); });
  m["isnan"] = {[](const Ctx&, const std::vector<at::Tensor>& x) { return at::isnan(x[0]); },
                [](const Ctx&, const std::vector<std::string>& x) {
                  return fmt::format("torch.isnan({})", x[0]);
                }};
  m["isinf"] = isinf();
  m["logical_not"] = {
      [](const Ctx&, const std::vector<at::Tensor>& x) { return at::logical_not(x[0]); },
      [](const Ctx&, const std::vector<std::string>& x) {
        return fmt::format("torch.logical_not({})", x[0]);
      }};
  m["logical_and"] = logical("logical_and", [](const at::Tensor& a, const at::Tensor& b) {
    return at::logical_and(a, b);
  });
  m["logical_or"] = logical(
      "logical_or", [](const at::Tensor& a, const at::Tensor& b) { return at::logical_or(a, b); });
  m["logical_xor"] = logical("logical_xor", [](const at::Tensor& a, const at::Tensor& b) {
    return at::logical_xor(a, b);
  });
  m["mod"] = mod();
  m["trunc_div"] = trunc_div();
}

}  // namespace crucible::libtorch::aten
