// The random graph generator (see random_graph.h): proposes ops with random operands and
// attributes, keeps what the registry's type rules accept, and plants special values in inputs.
#include "random_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "crucible/core/error.h"

namespace crucible::fuzz {
namespace {

const std::vector<std::string> kUnary = {
    "neg",   "abs",       "relu",        "exp",     "log",        "sqrt",       "rsqrt",
    "sin",   "cos",       "tanh",        "sigmoid", "erf",        "reciprocal", "gelu",
    "silu",  "hardswish", "hardsigmoid", "floor",   "ceil",       "round",      "sign",
    "tan",   "asin",      "acos",        "atan",    "sinh",       "cosh",       "asinh",
    "acosh", "atanh",     "isnan",       "isinf",   "logical_not"};
const std::vector<std::string> kBinary = {
    "add", "sub", "mul", "div", "maximum", "minimum",     "pow",        "eq",          "ne",
    "lt",  "le",  "gt",  "ge",  "mod",     "logical_and", "logical_or", "logical_xor", "trunc_div"};
const std::vector<std::string> kReduce = {"sum", "mean", "amax", "amin", "var"};

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& o) : rng_(seed), o_(o) {}

  Graph run() {
    for (int i = uni(1, 3); i > 0; --i) pool_.push_back(new_input(random_type()));
    const int target = uni(o_.min_nodes, o_.max_nodes);
    for (int tries = 0; nodes_ < target && tries < target * 30; ++tries) propose();
    if (nodes_ == 0) add({"neg", {pool_[0]}, {}}) || add({"abs", {pool_[0]}, {}});
    // The last node is always returned, a few others at random (fused values read outside their
    // kernel are what the memory plan must keep).
    std::vector<ValueId> outs = {pool_.back()};
    for (ValueId v : pool_) {
      if (g_.value(v).kind == ValueKind::kNode && v != pool_.back() && chance(0.25)) {
        outs.push_back(v);
      }
    }
    g_.set_outputs(outs);
    return std::move(g_);
  }

 private:
  struct Proposal {
    std::string op;
    std::vector<ValueId> operands;
    Attrs attrs;
  };

  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uni(0, static_cast<int>(v.size()) - 1))];
  }

  DType random_dtype() {
    const int r = uni(0, 99);
    if (r < 50) return DType::kF32;
    if (r < 60) return DType::kF64;
    if (r < 70) return DType::kBF16;
    if (r < 78) return DType::kI32;
    if (r < 86) return DType::kI64;
    if (r < 93) return DType::kU8;
    return DType::kBool;
  }
  int64_t random_dim() {
    if (chance(o_.zero_dim_probability)) return 0;
    static const std::vector<int64_t> kDims = {1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33};
    return pick(kDims);
  }
  Shape random_shape() {
    Shape s(static_cast<size_t>(uni(0, 4)));
    for (int64_t& d : s) d = random_dim();
    return s;
  }
  TensorType random_type() { return {random_dtype(), random_shape()}; }

  ValueId new_input(const TensorType& t) { return g_.add_input(fmt::format("in{}", inputs_++), t); }
  ValueId new_param(const TensorType& t) {
    Initializer init{"randn", {{"seed", int64_t{params_ + 11}}, {"std", 0.5}}};
    if (!is_floating(t.dtype)) init = {"randint", {{"low", int64_t{0}}, {"high", int64_t{5}}}};
    return g_.add_param(fmt::format("p{}", params_++), t, init);
  }
  // Shape `s` as a broadcasting partner sees it: leading dims dropped, some dims set to 1.
  Shape partner(const Shape& s) {
    Shape p(s.begin() + uni(0, static_cast<int>(s.size())), s.end());
    for (int64_t& d : p) {
      if (chance(0.3)) d = 1;
    }
    if (chance(0.2)) p.insert(p.begin(), 1);
    return p;
  }
  // Recent values are likelier operands: chains are what fusion works on.
  ValueId operand() {
    if (chance(0.6)) {
      const int n = static_cast<int>(pool_.size());
      return pool_[static_cast<size_t>(uni(std::max(0, n - 3), n - 1))];
    }
    return pick(pool_);
  }
  const TensorType& type(ValueId v) const { return g_.value(v).type; }
  int rank(ValueId v) const { return static_cast<int>(type(v).shape.size()); }

  bool add(Proposal p) {
    try {
      pool_.push_back(
          g_.add_node(p.op, p.operands, std::move(p.attrs), fmt::format("v{}", ids_++)));
      ++nodes_;
      return true;
    } catch (const Error&) {
      return false;  // the type rule said no: propose something else
    }
  }

  std::vector<int64_t> dim_subset(int r) {
    std::vector<int64_t> dims;
    for (int d = 0; d < r; ++d) {
      if (chance(0.5)) dims.push_back(chance(0.2) ? d - r : d);
    }
    std::shuffle(dims.begin(), dims.end(), rng_);
    return dims;
  }

  void propose() {
    const ValueId a = operand();
    const TensorType ta = type(a);
    const int r = rank(a);
    const int which = uni(0, 107);
    Proposal p;
    if (which < 22) {
      p = {pick(kUnary), {a}, {}};
      if (p.op == "gelu" && chance(0.5)) p.attrs.set("approximate", chance(0.5) ? "tanh" : "none");
      if (p.op == "isinf" && chance(0.5)) p.attrs.set("detect_negative", chance(0.5));
      if (p.op == "isinf" && chance(0.5)) p.attrs.set("detect_positive", chance(0.5));
    } else if (which < 44) {
      ValueId b = chance(0.5)
                      ? operand()
                      : new_input({chance(0.7) ? ta.dtype : random_dtype(), partner(ta.shape)});
      p = {pick(kBinary), chance(0.5) ? std::vector{a, b} : std::vector{b, a}, {}};
      if (p.op == "mod" && chance(0.5)) p.attrs.set("fmod", chance(0.5));
    } else if (which < 56) {
      p = {pick(kReduce), {a}, {}};
      if (!chance(0.15)) p.attrs.set("dims", dim_subset(r));
      if (chance(0.5)) p.attrs.set("keepdim", chance(0.5));
      if (p.op == "var" && chance(0.5)) p.attrs.set("correction", int64_t{uni(0, 1)});
    } else if (which < 62) {
      p = {chance(0.5) ? "softmax" : "log_softmax",
           {a},
           {{"dim", int64_t{uni(-r, std::max(r - 1, 0))}}}};
    } else if (which < 65) {
      const int k = std::min(r, uni(1, 2));
      const Shape norm(ta.shape.end() - k, ta.shape.end());
      p = {"layer_norm", {a}, {{"normalized_shape", norm}}};
      if (chance(0.5)) {
        p.operands.push_back(new_param({ta.dtype, norm}));
        p.operands.push_back(new_param({ta.dtype, norm}));
      }
      if (chance(0.3)) p.attrs.set("eps", 1e-3);
    } else if (which < 77) {
      propose_view(a, ta, p);
    } else if (which < 80) {
      static const std::vector<double> kBounds = {
          -1.0, 0.0, 0.5, 2.0, 6.0, std::numeric_limits<double>::quiet_NaN()};
      p = {"clamp", {a}, {}};
      const int form = uni(0, 2);
      if (form != 1) p.attrs.set("min", pick(kBounds));
      if (form != 0) p.attrs.set("max", pick(kBounds));
    } else if (which < 83) {
      p = {"cast", {a}, {{"dtype", random_dtype()}}};
    } else if (which < 86) {
      const Shape ps = partner(ta.shape);
      const ValueId cond = new_input({DType::kBool, chance(0.5) ? ta.shape : ps});
      const ValueId y = new_input({ta.dtype, ps});
      p = {"where", {cond, a, y}, {}};
    } else if (which < 89) {
      if (r == 0) return;
      const int d = uni(0, r - 1);
      p = {"cat", {a}, {{"dim", int64_t{chance(0.3) ? d - r : d}}}};
      for (int i = uni(0, 2); i > 0; --i) {
        Shape s = ta.shape;
        s[static_cast<size_t>(d)] = random_dim();
        p.operands.push_back(new_input({ta.dtype, s}));
      }
    } else if (which < 95) {
      propose_gemm(a, ta, p);
    } else if (which < 98) {
      propose_vision(a, ta, p);
    } else if (which >= 100) {
      propose_index(a, ta, p);
    } else {
      const int64_t v = uni(1, 9);
      const ValueId w = new_param({chance(0.8) ? DType::kF32 : DType::kF64, {v, random_dim()}});
      Shape is = random_shape();
      if (is.size() > 2) is.resize(2);
      const ValueId idx = g_.add_input(fmt::format("in{}", inputs_++), {DType::kI64, is},
                                       {"randint", {{"low", int64_t{0}}, {"high", v}}});
      p = {"embedding", {w, idx}, {}};
    }
    if (!p.op.empty()) add(std::move(p));
  }

  void propose_view(ValueId a, const TensorType& ta, Proposal& p) {
    const int r = static_cast<int>(ta.shape.size());
    switch (uni(0, 6)) {
      case 0: {
        std::vector<int64_t> perm(static_cast<size_t>(r));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng_);
        p = {"permute", {a}, {{"dims", perm}}};
        break;
      }
      case 1:
        p = {"transpose",
             {a},
             {{"dim0", int64_t{uni(-r, std::max(r - 1, 0))}},
              {"dim1", int64_t{uni(-r, std::max(r - 1, 0))}}}};
        break;
      case 2: {
        if (r == 0) return;
        const int d = uni(0, r - 1);
        const int64_t n = ta.shape[static_cast<size_t>(d)];
        p = {"slice", {a}, {{"dim", int64_t{d}}}};
        if (chance(0.7)) p.attrs.set("start", int64_t{uni(-2, static_cast<int>(n))});
        if (chance(0.7)) p.attrs.set("end", int64_t{uni(-2, static_cast<int>(n) + 2)});
        if (chance(0.5)) p.attrs.set("step", int64_t{uni(1, 3)});
        break;
      }
      case 3: {
        Shape s = ta.shape;
        for (int64_t& d : s) {
          if (d == 1 && chance(0.7)) d = random_dim();
        }
        if (chance(0.3)) s.insert(s.begin(), uni(1, 3));
        p = {"expand", {a}, {{"shape", s}}};
        break;
      }
      case 4: {
        Shape s;
        if (chance(0.5)) {
          s = {-1};
        } else if (r >= 2) {
          s = ta.shape;
          s[s.size() - 2] *= s.back();
          s.pop_back();
        } else {
          s = ta.shape;
          s.insert(s.begin(), 1);
        }
        p = {"reshape", {a}, {{"shape", s}}};
        break;
      }
      case 5:
        p = {"unsqueeze", {a}, {{"dim", int64_t{uni(-r - 1, r)}}}};
        break;
      default:
        p = {"squeeze", {a}, {}};
        if (r > 0 && chance(0.7)) p.attrs.set("dim", int64_t{uni(-r, r - 1)});
    }
  }

  void propose_gemm(ValueId a, const TensorType& ta, Proposal& p) {
    const int r = static_cast<int>(ta.shape.size());
    if (r == 0) return;
    const int64_t k = ta.shape.back(), n = random_dim();
    const DType wt = is_floating(ta.dtype) ? ta.dtype : DType::kF32;
    switch (uni(0, 2)) {
      case 0:  // linear with a parameter weight: codegen packs it (and fuses the activation)
        p = {"linear", {a, new_param({wt, {n, k}})}, {}};
        if (chance(0.6)) p.operands.push_back(new_param({wt, {n}}));
        break;
      case 1:
        p = {"matmul", {a, chance(0.5) ? new_param({wt, {k, n}}) : new_input({wt, {k, n}})}, {}};
        break;
      default:
        if (r != 2) return;
        p = {"addmm", {new_input({wt, {n}}), a, new_param({wt, {k, n}})}, {}};
        if (chance(0.5)) p.attrs.set("beta", 0.5);
        if (chance(0.5)) p.attrs.set("alpha", 2.0);
    }
  }

  // An i64 or i32 index input of shape `s` with values in [-n, n) (negative ones count from the
  // end).
  ValueId new_index(const Shape& s, int64_t n) {
    return g_.add_input(fmt::format("in{}", inputs_++),
                        {chance(0.5) ? DType::kI64 : DType::kI32, s},
                        {"randint", {{"low", -n}, {"high", n}}});
  }

  // The ops ONNX import brought: gather, argmax/argmin, cumsum, topk, trilu, pad, prod.
  void propose_index(ValueId a, const TensorType& ta, Proposal& p) {
    const int r = static_cast<int>(ta.shape.size());
    if (r == 0) return;
    const int axis = uni(0, r - 1), d = chance(0.3) ? axis - r : axis;
    const int64_t n = ta.shape[static_cast<size_t>(axis)];
    switch (uni(0, 7)) {
      case 0: {
        if (n == 0) return;
        Shape is = random_shape();
        if (is.size() > 2) is.resize(2);
        p = {"gather", {a, new_index(is, n)}, {{"dim", int64_t{d}}}};
        break;
      }
      case 1: {
        if (n == 0) return;
        Shape is = ta.shape;
        for (int64_t& s : is) s = chance(0.3) ? uni(0, static_cast<int>(s)) : s;
        is[static_cast<size_t>(axis)] = uni(0, 4);
        p = {"gather_elements", {a, new_index(is, n)}, {{"dim", int64_t{d}}}};
        break;
      }
      case 2:
        p = {chance(0.5) ? "argmax" : "argmin", {a}, {{"dim", int64_t{d}}}};
        if (chance(0.5)) p.attrs.set("keepdim", chance(0.5));
        if (chance(0.3)) p.attrs.set("select_last_index", true);
        break;
      case 3:
        p = {"cumsum", {a}, {{"dim", int64_t{d}}}};
        if (chance(0.3)) p.attrs.set("exclusive", true);
        if (chance(0.3)) p.attrs.set("reverse", true);
        break;
      case 4:
        p = {chance(0.5) ? "topk" : "topk_indices",
             {a},
             {{"k", int64_t{uni(0, static_cast<int>(n))}}, {"dim", int64_t{d}}}};
        if (chance(0.5)) p.attrs.set("largest", chance(0.5));
        break;
      case 5:
        p = {"trilu", {a}, {{"k", int64_t{uni(-2, 2)}}}};
        if (chance(0.5)) p.attrs.set("upper", chance(0.5));
        break;
      case 6: {
        std::vector<int64_t> pads(static_cast<size_t>(2 * r));
        for (int64_t& v : pads) v = uni(-1, 2);
        static const std::vector<std::string> kModes = {"constant", "reflect", "edge"};
        p = {"pad", {a}, {{"pads", pads}, {"mode", pick(kModes)}}};
        if (chance(0.3)) p.attrs.set("value", 1.5);
        break;
      }
      default:
        p = {"prod", {a}, {}};
        if (!chance(0.15)) p.attrs.set("dims", dim_subset(r));
        if (chance(0.5)) p.attrs.set("keepdim", chance(0.5));
    }
  }

  void propose_vision(ValueId a, const TensorType& ta, Proposal& p) {
    if (ta.shape.size() != 4 || !is_floating(ta.dtype)) {
      // A fresh NCHW image so the vision ops get their share.
      a = new_input(
          {chance(0.8) ? DType::kF32 : DType::kF64, {uni(1, 2), uni(1, 4), uni(1, 9), uni(1, 9)}});
      pool_.push_back(a);
    }
    const TensorType t = type(a);
    const int64_t c = t.shape[1];
    switch (uni(0, 5)) {
      case 0: {
        // Depthwise needs a channel: with c == 0, groups = c would divide by zero below.
        const bool depthwise = chance(0.3) && c > 0;
        const int64_t groups = depthwise ? c : 1, o = groups == c ? c : uni(1, 5);
        const int64_t kk = uni(1, 3);
        p = {"conv2d",
             {a, new_param({t.dtype, {o, c / groups, kk, kk}})},
             {{"padding", std::vector<int64_t>{uni(0, 1)}},
              {"stride", std::vector<int64_t>{uni(1, 2)}},
              {"groups", groups}}};
        if (chance(0.5)) p.operands.push_back(new_param({t.dtype, {o}}));
        break;
      }
      case 1:
        p = {"max_pool2d",
             {a},
             {{"kernel_size", std::vector<int64_t>{uni(1, 3)}}, {"ceil_mode", chance(0.3)}}};
        break;
      case 2:
        p = {"avg_pool2d",
             {a},
             {{"kernel_size", std::vector<int64_t>{uni(1, 2)}},
              {"padding", std::vector<int64_t>{uni(0, 1)}}}};
        break;
      case 3: {
        if (c == 0 || t.shape[2] == 0 || t.shape[3] == 0) return;
        const int64_t groups = chance(0.3) ? c : 1, o = groups * uni(1, 2), kk = uni(1, 3);
        const int64_t stride = uni(1, 2);
        p = {"conv_transpose2d",
             {a, new_param({t.dtype, {c, o / groups, kk, kk}})},
             {{"stride", std::vector<int64_t>{stride}},
              {"padding", std::vector<int64_t>{uni(0, 1)}},
              {"output_padding", std::vector<int64_t>{uni(0, static_cast<int>(stride) - 1)}},
              {"groups", groups}}};
        if (chance(0.5)) p.operands.push_back(new_param({t.dtype, {o}}));
        break;
      }
      case 4: {
        if (c == 0 || t.shape[2] == 0 || t.shape[3] == 0) return;
        // Only the modes torch's upsample ops share, at scales exact in binary, so libtorch's
        // float arithmetic of the source index rounds as ours does.
        static const std::vector<std::vector<std::string>> kModes = {
            {"nearest", "asymmetric", "floor"},
            {"nearest", "half_pixel", "round_prefer_ceil"},
            {"linear", "align_corners", "floor"},
            {"linear", "half_pixel", "floor"}};
        const std::vector<std::string>& m = pick(kModes);
        // align_corners steps (in - 1) / (out - 1): kept at 1 or 1/2.
        auto size = [&](int64_t n) -> int64_t {
          const int k = uni(0, 3);
          if (m[1] == "align_corners") return k < 2 ? n : 2 * n - 1;
          return k == 0 || (k == 3 && n % 2 != 0) ? n : k == 3 ? n / 2 : n * 2 * k;
        };
        p = {"resize",
             {a},
             {{"sizes", std::vector<int64_t>{t.shape[0], c, size(t.shape[2]), size(t.shape[3])}},
              {"mode", m[0]},
              {"coordinate_transformation_mode", m[1]},
              {"nearest_mode", m[2]}}};
        break;
      }
      default: {
        const TensorType vt{t.dtype, {c}};
        p = {"batch_norm", {a, new_param(vt), new_param(vt), new_param(vt), new_input(vt)}, {}};
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  GenOptions o_;
  Graph g_{"fuzz"};
  std::vector<ValueId> pool_;
  int inputs_ = 0, params_ = 0, ids_ = 0, nodes_ = 0;
};

}  // namespace

Graph random_graph(uint64_t seed, const GenOptions& opts) { return Generator(seed, opts).run(); }

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const GenOptions& opts) {
  std::vector<Tensor> in = make_inputs(g, seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {std::numeric_limits<double>::quiet_NaN(),
                                        inf,
                                        -inf,
                                        1e30,
                                        -1e30,
                                        1e-30,
                                        0.0,
                                        -0.0,
                                        80.0,
                                        -90.0};
  for (Tensor& t : in) {
    if (!is_floating(t.dtype()) || t.numel() == 0) continue;
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= opts.special_value_probability) {
      continue;
    }
    std::vector<double> v = t.to_doubles();
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    for (int64_t i = 0; i < n; ++i) {
      const auto at = std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng);
      v[at] = specials[std::uniform_int_distribution<size_t>(0, specials.size() - 1)(rng)];
    }
    t = Tensor::from_doubles(t.dtype(), t.shape(), v);
  }
  return in;
}

}  // namespace crucible::fuzz
