// Reverse-mode autodiff checked as torch.autograd.gradcheck does: for every op with a gradient
// rule, the joint graph's gradients against central finite differences in fp64, through a loss
// sum(op(...) * r) with r random so every output element weighs differently; and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ir/text_format.h"
#include "crucible/ops/autodiff.h"
#include "crucible/ops/interpreter.h"

namespace crucible {
namespace {

// One op's case: the forward node's line and its inputs' declarations (f64 unless the case says
// otherwise), with the range each input's values are drawn from (its domain, kinks avoided).
struct Case {
  std::string inputs;  // "%a: f64[2,3], %b: f64[3]"
  std::string node;    // "%y = add(%a, %b)"
  double lo = -2, hi = 2;
  int64_t int_hi = 1;      // integer inputs (indices) are drawn from [0, int_hi)
  int64_t zero_every = 0;  // > 0: every such element of the floating inputs is exactly 0
};

// By op; an op may have several.
const std::vector<std::pair<std::string, Case>>& cases() {
  static const std::vector<std::pair<std::string, Case>> k = {
      {"neg", {"%a: f64[2,3]", "%y = neg(%a)"}},
      {"abs", {"%a: f64[2,3]", "%y = abs(%a)"}},
      {"exp", {"%a: f64[2,3]", "%y = exp(%a)"}},
      {"log", {"%a: f64[2,3]", "%y = log(%a)", 0.5, 3}},
      {"sqrt", {"%a: f64[2,3]", "%y = sqrt(%a)", 0.5, 3}},
      {"rsqrt", {"%a: f64[2,3]", "%y = rsqrt(%a)", 0.5, 3}},
      {"reciprocal", {"%a: f64[2,3]", "%y = reciprocal(%a)", 0.5, 3}},
      {"sin", {"%a: f64[2,3]", "%y = sin(%a)"}},
      {"cos", {"%a: f64[2,3]", "%y = cos(%a)"}},
      {"tan", {"%a: f64[2,3]", "%y = tan(%a)", -1, 1}},
      {"sinh", {"%a: f64[2,3]", "%y = sinh(%a)"}},
      {"cosh", {"%a: f64[2,3]", "%y = cosh(%a)"}},
      {"tanh", {"%a: f64[2,3]", "%y = tanh(%a)"}},
      {"sigmoid", {"%a: f64[2,3]", "%y = sigmoid(%a)"}},
      {"asin", {"%a: f64[2,3]", "%y = asin(%a)", -0.9, 0.9}},
      {"acos", {"%a: f64[2,3]", "%y = acos(%a)", -0.9, 0.9}},
      {"atan", {"%a: f64[2,3]", "%y = atan(%a)"}},
      {"asinh", {"%a: f64[2,3]", "%y = asinh(%a)"}},
      {"acosh", {"%a: f64[2,3]", "%y = acosh(%a)", 1.2, 3}},
      {"atanh", {"%a: f64[2,3]", "%y = atanh(%a)", -0.9, 0.9}},
      {"erf", {"%a: f64[2,3]", "%y = erf(%a)"}},
      {"relu", {"%a: f64[2,3]", "%y = relu(%a)"}},
      {"silu", {"%a: f64[2,3]", "%y = silu(%a)"}},
      {"gelu", {"%a: f64[2,3]", "%y = gelu(%a)"}},
      {"hardsigmoid", {"%a: f64[2,4]", "%y = hardsigmoid(%a)", -4, 4}},
      {"hardswish", {"%a: f64[2,4]", "%y = hardswish(%a)", -4, 4}},
      {"clamp", {"%a: f64[2,4]", "%y = clamp(%a, min=-0.5, max=1.0)"}},
      {"floor", {"%a: f64[2,3]", "%y = floor(%a)"}},
      {"ceil", {"%a: f64[2,3]", "%y = ceil(%a)"}},
      {"round", {"%a: f64[2,3]", "%y = round(%a)"}},
      {"sign", {"%a: f64[2,3]", "%y = sign(%a)"}},
      {"cast", {"%a: f32[2,3]", "%y = cast(%a, dtype=f64)"}},
      {"add", {"%a: f64[2,3], %b: f64[3]", "%y = add(%a, %b)"}},
      {"sub", {"%a: f64[2,1], %b: f64[2,3]", "%y = sub(%a, %b)"}},
      {"mul", {"%a: f64[2,3], %b: f64[1,3]", "%y = mul(%a, %b)"}},
      {"div", {"%a: f64[2,3], %b: f64[3]", "%y = div(%a, %b)", 0.5, 2}},
      {"pow", {"%a: f64[2,3], %b: f64[2,3]", "%y = pow(%a, %b)", 0.5, 2}},
      {"maximum", {"%a: f64[2,3], %b: f64[3]", "%y = maximum(%a, %b)"}},
      {"minimum", {"%a: f64[2,3], %b: f64[2,3]", "%y = minimum(%a, %b)"}},
      {"where", {"%a: f64[2,3], %b: f64[3]", "%c = gt(%a, %b)\n  %y = where(%c, %a, %b)"}},
      {"sum", {"%a: f64[2,3,4]", "%y = sum(%a, dims=[0,2])"}},
      {"prod", {"%a: f64[2,3,4]", "%y = prod(%a, dims=[1])"}},
      // Rows with one exact zero and with two (every third element 0).
      {"prod", {"%a: f64[8,4]", "%y = prod(%a, dims=[1], keepdim=true)", -2, 2, 1, 3}},
      {"topk", {"%a: f64[3,5]", "%y = topk(%a, k=2, dim=1)"}},
      {"topk", {"%a: f64[4,3]", "%y = topk(%a, k=3, dim=0, largest=false)"}},
      {"mean", {"%a: f64[2,3,4]", "%y = mean(%a, dims=[-1], keepdim=true)"}},
      {"amax", {"%a: f64[2,3,4]", "%y = amax(%a, dims=[1])"}},
      {"amin", {"%a: f64[2,3,4]", "%y = amin(%a)"}},
      {"var", {"%a: f64[2,5]", "%y = var(%a, dims=[1])"}},
      {"softmax", {"%a: f64[2,5]", "%y = softmax(%a, dim=-1)"}},
      {"log_softmax", {"%a: f64[3,4]", "%y = log_softmax(%a, dim=0)"}},
      {"matmul", {"%a: f64[2,3,4], %b: f64[4,5]", "%y = matmul(%a, %b)"}},
      {"linear", {"%a: f64[2,3,4], %w: f64[5,4], %c: f64[5]", "%y = linear(%a, %w, %c)"}},
      {"addmm",
       {"%c: f64[3], %a: f64[2,4], %b: f64[4,3]", "%y = addmm(%c, %a, %b, beta=0.5, alpha=2.0)"}},
      {"reshape", {"%a: f64[2,6]", "%y = reshape(%a, shape=[3,4])"}},
      {"squeeze", {"%a: f64[2,1,3]", "%y = squeeze(%a, dim=1)"}},
      {"unsqueeze", {"%a: f64[2,3]", "%y = unsqueeze(%a, dim=-1)"}},
      {"permute", {"%a: f64[2,3,4]", "%y = permute(%a, dims=[2,0,1])"}},
      {"transpose", {"%a: f64[2,3,4]", "%y = transpose(%a, dim0=0, dim1=2)"}},
      {"expand", {"%a: f64[3,1]", "%y = expand(%a, shape=[2,3,4])"}},
      {"slice", {"%a: f64[3,7]", "%y = slice(%a, dim=1, start=1, end=-2)"}},
      {"slice", {"%a: f64[5,3]", "%y = slice(%a, dim=0, start=-4, step=2)"}},
      {"cat", {"%a: f64[2,3], %b: f64[2,1]", "%y = cat(%a, %b, %a, dim=-1)"}},
      {"embedding", {"%w: f64[5,3], %i: i64[2,4]", "%y = embedding(%w, %i)", -2, 2, 5}},
      {"layer_norm",
       {"%a: f64[2,3,4], %w: f64[4], %c: f64[4]",
        "%y = layer_norm(%a, %w, %c, normalized_shape=[4], eps=1e-05)"}},
      {"layer_norm", {"%a: f64[2,3,4]", "%y = layer_norm(%a, normalized_shape=[3,4])"}},
      {"cumsum", {"%a: f64[3,4]", "%y = cumsum(%a, dim=1)"}},
      {"cumsum", {"%a: f64[3,4]", "%y = cumsum(%a, dim=0, exclusive=true, reverse=true)"}},
      {"trilu", {"%a: f64[2,3,4]", "%y = trilu(%a, k=1, upper=false)"}},
      {"pad", {"%a: f64[3,4]", "%y = pad(%a, pads=[1,-1,0,2], value=0.5)"}},
      {"gather", {"%a: f64[3,5,2], %i: i64[2,3]", "%y = gather(%a, %i, dim=1)", -2, 2, 5}},
      {"gather_elements",
       {"%a: f64[3,4], %i: i64[3,4]", "%y = gather_elements(%a, %i, dim=0)", -2, 2, 3}},
      {"conv2d", {"%a: f64[2,3,5,5], %w: f64[4,3,3,3]", "%y = conv2d(%a, %w)"}},
      {"conv2d",
       {"%a: f64[2,3,6,5], %w: f64[4,3,3,2], %c: f64[4]",
        "%y = conv2d(%a, %w, %c, stride=[2,2], padding=[1,1])"}},
      {"conv2d",
       {"%a: f64[1,4,7,7], %w: f64[6,2,3,3]",
        "%y = conv2d(%a, %w, groups=2, dilation=[2,2], padding=[2,1])"}},
      {"conv2d",
       {"%a: f64[2,3,7,6], %w: f64[3,1,3,3]",
        "%y = conv2d(%a, %w, groups=3, stride=[2,3], padding=[1,1])"}},
      {"conv_transpose2d", {"%a: f64[2,3,4,4], %w: f64[3,2,3,3]", "%y = conv_transpose2d(%a, %w)"}},
      {"conv_transpose2d",
       {"%a: f64[2,4,3,4], %w: f64[4,3,3,2], %c: f64[6]",
        "%y = conv_transpose2d(%a, %w, %c, stride=[2,2], padding=[1,1], output_padding=[1,0], "
        "groups=2)"}},
      {"conv_transpose2d",
       {"%a: f64[1,2,4,3], %w: f64[2,2,2,3]",
        "%y = conv_transpose2d(%a, %w, stride=[3,2], dilation=[2,1], padding=[0,1], "
        "output_padding=[2,1])"}},
      {"resize", {"%a: f64[2,3,3,4]", "%y = resize(%a, sizes=[2, 3, 6, 7])"}},
      {"resize", {"%a: f64[1,2,4,5]", "%y = resize(%a, sizes=[1, 2, 7, 3], mode=\"linear\")"}},
      {"resize",
       {"%a: f64[1,2,5,4]",
        "%y = resize(%a, sizes=[1, 2, 3, 9], mode=\"linear\", "
        "coordinate_transformation_mode=\"align_corners\")"}},
      {"resize",
       {"%a: f64[2,1,3,3]",
        "%y = resize(%a, sizes=[2, 1, 7, 5], coordinate_transformation_mode=\"asymmetric\", "
        "nearest_mode=\"floor\", scale_h=2.5, scale_w=1.5)"}},
      {"max_pool2d",
       {"%a: f64[2,2,5,5]", "%y = max_pool2d(%a, kernel_size=[3,3], stride=[2,2], padding=[1,1])"}},
      {"max_pool2d",
       {"%a: f64[1,2,5,5]",
        "%y = max_pool2d(%a, kernel_size=[2,2], stride=[2,2], ceil_mode=true)"}},
      {"max_pool2d",
       {"%a: f64[1,1,6,6]", "%y = max_pool2d(%a, kernel_size=[2,2], dilation=[2,2])"}},
      {"avg_pool2d", {"%a: f64[2,2,6,6]", "%y = avg_pool2d(%a, kernel_size=[2,2], stride=[2,2])"}},
      {"avg_pool2d",
       {"%a: f64[1,2,5,5]", "%y = avg_pool2d(%a, kernel_size=[3,3], stride=[2,2], padding=[1,1])"}},
      {"adaptive_avg_pool2d",
       {"%a: f64[2,3,4,4]", "%y = adaptive_avg_pool2d(%a, output_size=[1,1])"}},
      {"adaptive_avg_pool2d",
       {"%a: f64[1,2,6,4]", "%y = adaptive_avg_pool2d(%a, output_size=[3,2])"}},
      {"batch_norm",
       {"%a: f64[2,3,4,4], %w: f64[3], %c: f64[3], %m: f64[3], %v: f64[3]",
        "%y = batch_norm(%a, %w, %c, %m, %v, eps=1e-05)", 0.5, 2}},
  };
  return k;
}

// Values in [lo, hi] on a 2^-12 grid (exact in f32 too, so a perturbed f32 input is exact).
// Integers in [0, int_hi) for an integer input.
std::vector<double> draw(size_t n, double lo, double hi, bool integer, int64_t int_hi,
                         uint64_t& state) {
  std::vector<double> out(n);
  for (double& v : out) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    v = integer ? std::floor(u * static_cast<double>(int_hi))
                : std::round((lo + (hi - lo) * u) * 4096.0) / 4096.0;
  }
  return out;
}

Graph case_graph(const Case& c, const std::string& name) {
  std::string text = "graph " + name + "(" + c.inputs + ") {\n  " + c.node + "\n";
  // The loss weighs every element of %y differently: r is an input of %y's shape.
  return parse_graph(text + "  return %y\n}\n");
}

TEST(Autodiff, EveryRuleHasACaseHere) {
  std::set<std::string> covered;
  for (const auto& [op, c] : cases()) covered.insert(op);
  for (const std::string& op : differentiable_ops())
    EXPECT_TRUE(covered.contains(op)) << op << " has a gradient rule and no case here";
  EXPECT_GE(differentiable_ops().size(), 69u);
}

TEST(Autodiff, EveryRuleMatchesFiniteDifferencesInFp64) {
  for (const auto& [op, c] : cases()) {
    SCOPED_TRACE(op + ": " + c.node);
    ASSERT_TRUE(differentiable(op));
    const Graph probe = case_graph(c, "probe");  // for %y's shape
    const TensorType yt = probe.value(probe.outputs()[0]).type;
    // The loss: sum(cast(y, f64) * r).
    std::string inputs = c.inputs + ", %r: f64[";
    for (size_t d = 0; d < yt.shape.size(); ++d)
      inputs += (d ? "," : "") + std::to_string(yt.shape[d]);
    inputs += "]";
    const Graph g = parse_graph("graph loss(" + inputs + ") {\n  " + c.node +
                                "\n  %y64 = cast(%y, dtype=f64)\n  %l = mul(%y64, %r)\n"
                                "  %s = sum(%l)\n  return %s\n}\n");
    std::vector<ValueId> wrt;
    for (ValueId v : g.inputs()) {
      if (is_floating(g.value(v).type.dtype) && g.value(v).name != "r") wrt.push_back(v);
    }
    Graph joint;
    try {
      joint = joint_graph(g, wrt);
    } catch (const Error& e) {
      ADD_FAILURE() << "joint_graph: " << e.what();
      continue;
    }
    ASSERT_EQ(joint.outputs().size(), 1 + wrt.size());
    uint64_t state = 0x9e3779b97f4a7c15ULL ^ std::hash<std::string>()(op);
    std::vector<std::vector<double>> values;
    for (ValueId v : g.inputs()) {
      const bool r = g.value(v).name == "r";
      const bool floating = is_floating(g.value(v).type.dtype);
      values.push_back(draw(static_cast<size_t>(g.value(v).type.numel()), r ? -1 : c.lo,
                            r ? 1 : c.hi, !floating, c.int_hi, state));
      for (size_t e = 0; floating && !r && c.zero_every > 0 && e < values.back().size();
           e += static_cast<size_t>(c.zero_every))
        values.back()[e] = 0;
    }
    auto tensors = [&](const std::vector<std::vector<double>>& vals) {
      std::vector<Tensor> out;
      for (size_t i = 0; i < vals.size(); ++i) {
        const TensorType& t = g.value(g.inputs()[i]).type;
        out.push_back(Tensor::from_doubles(t.dtype, t.shape, vals[i]));
      }
      return out;
    };
    Interpreter forward(g), backward(joint);
    std::vector<Tensor> got;
    try {
      got = backward.run(tensors(values));
    } catch (const Error& e) {
      ADD_FAILURE() << "the joint graph: " << e.what();
      continue;
    }
    auto loss = [&](const std::vector<std::vector<double>>& vals) {
      return forward.run(tensors(vals))[0].get(0);
    };
    EXPECT_NEAR(got[0].get(0), loss(values), 1e-12) << "the joint graph's loss";
    for (size_t w = 0; w < wrt.size(); ++w) {
      const size_t input = static_cast<size_t>(
          std::find(g.inputs().begin(), g.inputs().end(), wrt[w]) - g.inputs().begin());
      const bool f32 = g.value(wrt[w]).type.dtype == DType::kF32;
      const double h = f32 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -20);
      const Tensor& grad = got[1 + w];
      ASSERT_EQ(grad.shape(), g.value(wrt[w]).type.shape);
      for (size_t e = 0; e < values[input].size(); ++e) {
        auto plus = values, minus = values;
        plus[input][e] += h;
        minus[input][e] -= h;
        const double numeric = (loss(plus) - loss(minus)) / (2 * h);
        const double analytic = grad.get(static_cast<int64_t>(e));
        EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric))
            << "d/d %" << g.value(wrt[w]).name << "[" << e << "]";
      }
    }
  }
}

// Every floating op of the registry has a rule; one registered here has none.
void register_op_without_gradient() {
  if (OpRegistry::global().find("test_op_without_gradient") != nullptr) return;
  OpRegistry::global().add(OpDef{{"test_op_without_gradient", 1, 1, {}},
                                 [](std::span<const TensorType> t, const Attrs&) { return t[0]; },
                                 [](std::span<const Tensor> x, const Attrs&) { return x[0]; },
                                 {}});
}

// A node on the way to the loss whose op has no rule is named, with the node; an integer value
// is no variable; a variable the loss does not reach (or reaches only through integers, whose
// steps have no slope) gets zeros.
TEST(Autodiff, RefusalsNameTheOpAndTheValue) {
  register_op_without_gradient();
  const Graph g = parse_graph(
      "graph g(%a: f64[2,3], %b: f64[3], %i: i64[2]) {\n"
      "  %m = test_op_without_gradient(%a)\n  %s = sum(%m)\n  return %s\n}\n");
  try {
    joint_graph(g, std::vector<ValueId>{g.inputs()[0]});
    FAIL() << "test_op_without_gradient differentiated";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for op 'test_op_without_gradient'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("%m"), std::string::npos) << e.what();
  }
  try {
    joint_graph(g, std::vector<ValueId>{g.inputs()[2]});
    FAIL() << "an integer differentiated";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("%i is i64"), std::string::npos) << e.what();
  }
  const Graph unused = joint_graph(
      parse_graph("graph u(%a: f64[2], %b: f64[3]) {\n  %s = sum(%a)\n  return %s\n}\n"),
      std::vector<ValueId>{1});
  Interpreter run(unused);
  const auto out = run.run(std::vector<Tensor>{Tensor::full(DType::kF64, {2}, 1.0),
                                               Tensor::full(DType::kF64, {3}, 1.0)});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(out[1].get(i), 0.0);
  EXPECT_TRUE(unused.find_value("grad.b").has_value());
  Interpreter through_int(
      joint_graph(parse_graph("graph t(%a: f64[2,3]) {\n  %m = argmax(%a, dim=1)\n"
                              "  %f = cast(%m, dtype=f64)\n  %s = sum(%f)\n  return %s\n}\n"),
                  std::vector<ValueId>{0}));
  const auto z = through_int.run(std::vector<Tensor>{Tensor::full(DType::kF64, {2, 3}, 1.0)});
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(z[1].get(i), 0.0);
  // Window ops whose gradient is not implemented say which case.
  for (const auto& [node, why] : std::vector<std::pair<std::string, std::string>>{
           {"adaptive_avg_pool2d(%a, output_size=[3,3])", "output sizes that divide the input"},
           {"avg_pool2d(%a, kernel_size=[2,2], stride=[2,2], ceil_mode=true)", "no ceil_mode"},
           {"avg_pool2d(%a, kernel_size=[3,3], padding=[1,1], count_include_pad=false)",
            "count_include_pad"}}) {
    const Graph w =
        parse_graph("graph w(%a: f64[1,2,5,5]) {\n  %y = " + node + "\n  return %y\n}\n");
    try {
      joint_graph(w, std::vector<ValueId>{0});
      FAIL() << node << " differentiated";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// Gradients reaching one value along several paths add up: y = a * a + a.
TEST(Autodiff, PathsToOneValueAdd) {
  const Graph g = parse_graph(
      "graph p(%a: f64[3]) {\n  %m = mul(%a, %a)\n  %y = add(%m, %a)\n  %s = sum(%y)\n"
      "  return %s\n}\n");
  Interpreter run(joint_graph(g, std::vector<ValueId>{g.inputs()[0]}));
  const auto out = run.run(std::vector<Tensor>{
      Tensor::from_doubles(DType::kF64, {3}, std::vector<double>{1.0, -2.0, 0.5})});
  EXPECT_EQ(out[1].get(0), 3.0);
  EXPECT_EQ(out[1].get(1), -3.0);
  EXPECT_EQ(out[1].get(2), 2.0);
}

}  // namespace
}  // namespace crucible
