// Codegen against eager on the shapes reductions find awkward: size-0 and size-1 dims, several
// reduced dims, transposed and sliced views, with and without fusion; and compile errors that name
// the user's node; and that the decompositions codegen declares are the ones it makes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend_pair.h"
#include "codegen/passes.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/codegen/program.h"
#include "crucible/ir/text_format.h"

namespace crucible {
namespace {

class CodegenDegenerate : public testing::BackendPair {
 protected:
  // The sweeps' graphs hold hundreds of small kernels: fewer, larger translation units compile
  // them faster (each unit parses the prelude again).
  static plugin::Options options(bool fusion = true) {
    plugin::Options o;
    o.config["kernels_per_unit"] = "64";
    if (!fusion) o.config["fusion"] = "off";
    return o;
  }

  // Both fusion settings.
  static void ExpectSameAsEagerFusedAndNot(const Graph& g) {
    {
      SCOPED_TRACE("fusion=on");
      ExpectSameAsEager(g, {}, options());
    }
    {
      SCOPED_TRACE("fusion=off");
      ExpectSameAsEager(g, {}, options(false));
    }
  }
};

// How an operand is laid out: the input itself, a transpose of dims 0 and rank-1 of an input of
// the transposed shape, or every other element along the last dim of a longer input (gaps and a
// stride of 2).
enum class Layout { kContiguous, kTransposed, kSliced };
constexpr Layout kLayouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kSliced};

const char* layout_name(Layout l) {
  return l == Layout::kContiguous   ? "contiguous"
         : l == Layout::kTransposed ? "transposed"
                                    : "sliced";
}

std::string list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

// A graph under construction: many independent cases in one graph, so that one compile covers
// them all.
struct GraphText {
  std::vector<std::string> inputs;
  std::string params, body;
  std::vector<std::string> outputs;

  // A new input `%name` of dtype `dt` viewed as `shape` laid out as `layout`: returns the value
  // holding that view.
  std::string view(const std::string& name, const char* dt, const Shape& s, Layout layout) {
    const size_t r = s.size();
    Shape in_shape = s;
    std::string v = name;
    if (layout == Layout::kTransposed && r >= 2) {
      std::swap(in_shape[0], in_shape[r - 1]);
      v = name + "_t";
      body += fmt::format("  %{} = transpose(%{}, dim0=0, dim1={})\n", v, name, r - 1);
    } else if (layout == Layout::kSliced) {
      in_shape[r - 1] = 2 * s[r - 1] + 1;
      v = name + "_s";
      body += fmt::format("  %{} = slice(%{}, dim={}, start=1, end={}, step=2)\n", v, name, r - 1,
                          in_shape[r - 1]);
    }
    inputs.push_back(fmt::format("%{}: {}{}", name, dt, shape_str(in_shape)));
    return v;
  }

  Graph parse() const {
    return parse_graph(fmt::format("graph cases({}) {{\n{}{}  return {}\n}}\n",
                                   fmt::join(inputs, ", "), params, body,
                                   fmt::join(outputs, ", ")));
  }
};

// Reductions of `shape` laid out as `layout`, for every subset of dims (the empty subset as
// dims=[] and as no dims attribute, both meaning all dims) and keepdim on and off: each reduction
// op on f32, sum and amax on i32 (sum gives i64), and for each one `sub(view, reduction)` (the
// reduction reshaped to keepdim form first when keepdim is off), which reads the result with
// broadcasting beside its input. A subset's reductions come first and their subs after them, so
// that each subset is one row kernel (or one pointwise kernel after extern calls) and the graph
// stays quick to compile. amax/amin over a zero-size dim are left out: eager rejects them.
// `lowered_only` keeps the f32 reductions over trailing dims, which codegen lowers itself (the
// others are extern calls whatever the fusion setting), less amin, amax's mirror image.
void add_reductions(GraphText& gt, const std::string& p, const Shape& s, Layout layout,
                    bool lowered_only) {
  const size_t r = s.size();
  const std::string xv = gt.view(p + "x", "f32", s, layout);
  const std::string kv = lowered_only ? "" : gt.view(p + "k", "i32", s, layout);
  int n = 0;
  for (int mask = -1; mask < (1 << r); ++mask) {
    std::vector<int64_t> dims;
    Shape keep_shape = s;
    bool zero_reduced = false, trailing = mask > 0;
    for (size_t d = 0; d < r; ++d) {
      const bool reduced = mask <= 0 || (mask >> d & 1);
      if (mask > 0 && reduced) dims.push_back(static_cast<int64_t>(d));
      if (reduced) keep_shape[d] = 1;
      zero_reduced |= reduced && s[d] == 0;
      trailing &= reduced || !(mask >> (d + 1));
    }
    if (lowered_only && !trailing) continue;
    const std::string dims_attr = mask < 0 ? "" : fmt::format("dims={}, ", list(dims));
    for (bool keepdim : {true, false}) {
      std::string subs;
      for (const char* op : {"sum", "mean", "amax", "amin", "var", "i:sum", "i:amax"}) {
        const bool integer = op[0] == 'i';
        const std::string name = integer ? op + 2 : op;
        if (zero_reduced && (name == "amax" || name == "amin")) continue;
        if (lowered_only && (integer || name == "var" || name == "amin")) continue;
        const std::string red = fmt::format("{}r{}", p, n), y = fmt::format("{}y{}", p, n);
        const std::string& in = integer ? kv : xv;
        gt.body += fmt::format("  %{} = {}(%{}, {}keepdim={})\n", red, name, in, dims_attr,
                               keepdim ? "true" : "false");
        std::string back = red;
        if (!keepdim) {
          back = fmt::format("{}q{}", p, n);
          gt.body += fmt::format("  %{} = reshape(%{}, shape={})\n", back, red, list(keep_shape));
        }
        subs += fmt::format("  %{} = sub(%{}, %{})\n", y, in, back);
        gt.outputs.push_back("%" + red);
        gt.outputs.push_back("%" + y);
        ++n;
      }
      gt.body += subs;
    }
  }
}

// softmax and log_softmax over every dim and layer_norm over every trailing run of dims (with and
// without weight and bias) of `shape` laid out as `layout`, each followed by an add of its input.
void add_normalizations(GraphText& gt, const std::string& p, const Shape& s, Layout layout) {
  const size_t r = s.size();
  const std::string xv = gt.view(p + "x", "f32", s, layout);
  int n = 0;
  auto add = [&](const std::string& call) {
    gt.body += fmt::format("  %{0}n{1} = {2}\n  %{0}a{1} = add(%{0}n{1}, %{3})\n", p, n, call, xv);
    gt.outputs.push_back(fmt::format("%{}n{}", p, n));
    gt.outputs.push_back(fmt::format("%{}a{}", p, n));
    ++n;
  };
  for (size_t d = 0; d < r; ++d) {
    add(fmt::format("softmax(%{}, dim={})", xv, d));
    add(fmt::format("log_softmax(%{}, dim={})", xv,
                    static_cast<int64_t>(d) - static_cast<int64_t>(r)));
  }
  for (size_t k = 1; k <= r; ++k) {
    const Shape ns(s.end() - static_cast<std::ptrdiff_t>(k), s.end());
    gt.params += fmt::format(
        "  param %{0}w{1}: f32{2} = randn(seed={1})\n  param %{0}b{1}: f32{2} = randn(seed={3})\n",
        p, k, shape_str(ns), k + 10);
    add(fmt::format("layer_norm(%{0}, %{1}w{2}, %{1}b{2}, normalized_shape={3}, eps=1e-05)", xv, p,
                    k, shape_str(ns)));
    add(fmt::format("layer_norm(%{}, normalized_shape={}, eps=1e-05)", xv, shape_str(ns)));
  }
}

const std::vector<Shape> kReductionShapes = {{2, 3, 4}, {1, 5, 1}, {3, 0, 2}, {4, 1}};

// One graph per shape, its three layouts side by side.
TEST_F(CodegenDegenerate, ReductionsOverEveryDimSubsetMatchEager) {
  for (const Shape& s : kReductionShapes) {
    SCOPED_TRACE(shape_str(s));
    GraphText gt;
    for (Layout l : kLayouts) add_reductions(gt, layout_name(l)[0] + std::string("_"), s, l, false);
    ExpectSameAsEager(gt.parse(), {}, options());
  }
}

TEST_F(CodegenDegenerate, LoweredReductionsMatchEagerUnfused) {
  GraphText gt;
  int c = 0;
  for (const Shape& s : kReductionShapes) {
    for (Layout l : kLayouts) add_reductions(gt, fmt::format("c{}_", c++), s, l, true);
  }
  ExpectSameAsEager(gt.parse(), {}, options(false));
}

TEST_F(CodegenDegenerate, NormalizationsOverSizeZeroAndSizeOneDimsMatchEager) {
  GraphText gt;
  int c = 0;
  for (const Shape& s :
       std::vector<Shape>{{3, 0}, {0, 4}, {4, 1}, {1, 4}, {2, 1, 3}, {2, 0, 3}, {2, 3, 1}}) {
    for (Layout l : kLayouts) add_normalizations(gt, fmt::format("c{}_", c++), s, l);
  }
  ExpectSameAsEager(gt.parse(), {}, options());
}

// Unfused, every primitive of the decompositions is a kernel of its own: fewer cases.
TEST_F(CodegenDegenerate, NormalizationsOverSizeZeroAndSizeOneDimsMatchEagerUnfused) {
  GraphText gt;
  int c = 0;
  for (const Shape& s : std::vector<Shape>{{3, 0}, {4, 1}}) {
    for (Layout l : {Layout::kTransposed, Layout::kSliced})
      add_normalizations(gt, fmt::format("c{}_", c++), s, l);
  }
  add_normalizations(gt, "c4_", {2, 3, 1}, Layout::kSliced);
  ExpectSameAsEager(gt.parse(), {}, options(false));
}

// The defects differential testing found, each as it was reported.
TEST_F(CodegenDegenerate, SoftmaxAndLogSoftmaxOverASizeOneDim) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph sm1(%x: f32[4,1], %z: f32[1,6]) {
  %y = softmax(%x, dim=-1)
  %l = log_softmax(%x, dim=1)
  %u = softmax(%z, dim=0)
  return %y, %l, %u
}
)"));
}

TEST_F(CodegenDegenerate, LayerNormOverOneElement) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph ln1(%x: f32[20,1], %w: f32[1], %b: f32[1]) {
  %y = layer_norm(%x, %w, %b, normalized_shape=[1], eps=1e-05)
  %z = layer_norm(%x, normalized_shape=[1], eps=1e-05)
  return %y, %z
}
)"));
}

TEST_F(CodegenDegenerate, KeepdimAmaxOverASizeOneDimThenSub) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph a(%x: f32[4,1]) {
  %m = amax(%x, dims=[1], keepdim=true)
  %y = sub(%x, %m)
  return %y
}
)"));
}

TEST_F(CodegenDegenerate, MultiDimSumBesideABroadcastAddOfTheSameTensor) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph s(%x: f32[2,3,4], %b: f32[4], %c: f32[3,1]) {
  %s = sum(%x, dims=[1,2], keepdim=true)
  %y = add(%x, %b)
  %z = mul(%x, %c)
  %m = mean(%x, dims=[1,2])
  return %s, %y, %z, %m
}
)"));
}

TEST_F(CodegenDegenerate, LayerNormOverTwoDimsOfAStridedSlice) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph l(%x: f32[4,6,8]) {
  %s = slice(%x, dim=2, start=1, end=7)
  %y = layer_norm(%s, normalized_shape=[6,6], eps=1e-05)
  %t = slice(%x, dim=1, start=0, end=6, step=2)
  %z = layer_norm(%t, normalized_shape=[3,8], eps=1e-05)
  return %y, %z
}
)"));
}

TEST_F(CodegenDegenerate, ExplicitAllDimsOverATransposedView) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph t(%x: f32[5,7], %w: f32[3,4,5]) {
  %t = transpose(%x, dim0=0, dim1=1)
  %s = sum(%t, dims=[0,1])
  %m = amax(%t, dims=[0,1], keepdim=true)
  %p = permute(%w, dims=[2,0,1])
  %q = mean(%p, dims=[1,2], keepdim=true)
  %d = sub(%p, %q)
  return %s, %m, %d
}
)"));
}

TEST_F(CodegenDegenerate, SeveralDimsOneOfSizeZero) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph z(%x: f32[3,2,0], %v: f32[4,0,5]) {
  %s = sum(%x, dims=[1,2], keepdim=true)
  %y = add(%x, %s)
  %m = mean(%x, dims=[1,2])
  %w = sum(%v, dims=[1,2])
  %u = amax(%v, dims=[0,2], keepdim=true)
  return %s, %y, %m, %w, %u
}
)"));
}

TEST_F(CodegenDegenerate, SoftmaxOverAZeroSizeDim) {
  ExpectSameAsEagerFusedAndNot(parse_graph(R"(
graph sm0(%x: f32[3,0], %z: f32[0,5]) {
  %y = softmax(%x, dim=-1)
  %l = log_softmax(%x, dim=1)
  %n = layer_norm(%x, normalized_shape=[0], eps=1e-05)
  %u = softmax(%z, dim=1)
  return %y, %l, %n, %u
}
)"));
}

// The degenerate cases keep their fused form (one row kernel, no extern call): a row of one
// element, reduced dims walked by loops around the SIMD loop, a row of no element.
TEST_F(CodegenDegenerate, DegenerateRowsStayFused) {
  const std::string sm = post_fusion_ir(parse_graph(
      "graph a(%x: f32[4,1]) {\n  %y = softmax(%x, dim=-1)\n  %l = log_softmax(%x, dim=1)\n"
      "  return %y, %l\n}\n"));
  EXPECT_EQ(count(sm, "cpp_fused_amax_div_exp_log_sub_sum_0 over [4] x reduce [1]\n"), 1) << sm;
  const std::string sum = post_fusion_ir(parse_graph(
      "graph b(%x: f32[2,3,4], %b: f32[4]) {\n  %s = sum(%x, dims=[1,2], keepdim=true)\n"
      "  %y = add(%x, %b)\n  return %s, %y\n}\n"));
  EXPECT_EQ(count(sum, "cpp_fused_add_sum_0 over [2] x reduce [3,4]\n"), 1) << sum;
  const std::string t = post_fusion_ir(
      parse_graph("graph c(%x: f32[5,7], %z: f32[3,0,2]) {\n  %t = transpose(%x, dim0=0, dim1=1)\n"
                  "  %s = sum(%t, dims=[0,1])\n  %u = mean(%z, dims=[1,2], keepdim=true)\n"
                  "  %v = sub(%z, %u)\n  return %s, %v\n}\n"));
  EXPECT_NE(t.find("cpp_fused_sum_0 over [] x reduce [7,5]\n"), std::string::npos) << t;
  EXPECT_NE(t.find("over [3] x reduce [0,2]\n"), std::string::npos) << t;
  for (const std::string* ir : {&sm, &sum, &t}) EXPECT_EQ(count(*ir, "extern::"), 0) << *ir;
}

// A failure the passes pin on a node of the decomposed graph is reported at the node the user
// wrote: its canonical line and source line, never a decomposition's helper (softmax's amax).
TEST_F(CodegenDegenerate, ErrorsNameTheUsersNode) {
  const Graph g = parse_graph(
      "graph e(%x: f32[4,8]) {\n  %y = softmax(%x, dim=-1)\n"
      "  %m = amax(%y, dims=[1])\n  return %m\n}\n");
  std::vector<ValueId> value_of;
  std::vector<int> origin;
  const Graph d = codegen::decompose(g, &value_of, {}, &origin);
  ASSERT_EQ(origin.size(), d.nodes().size());
  int helper = -1, last = -1;
  for (size_t i = 0; i < d.nodes().size(); ++i) {
    const std::string& name = d.value(d.nodes()[i].output).name;
    if (name == "y.max") helper = static_cast<int>(i);
    if (name == "m") last = static_cast<int>(i);
  }
  ASSERT_GE(helper, 0);
  ASSERT_GE(last, 0);
  const std::string at_helper = codegen::at_source_node(g, d, origin, helper, "what went wrong");
  EXPECT_EQ(at_helper,
            "codegen: cannot compile `%y: f32[4,8] = softmax(%x, dim=-1)` (line 2, in its "
            "decomposition): what went wrong");
  EXPECT_EQ(at_helper.find("y.max"), std::string::npos);
  EXPECT_EQ(codegen::at_source_node(g, d, origin, last, "why"),
            "codegen: cannot compile `%m: f32[4] = amax(%y, dims=[1])` (line 3): why");
}

// layer_norm of rows without variance, at magnitudes where the deviations a rounded mean leaves
// would dwarf eps: exact zeros on both backends, fused and not, over one and two normalized dims,
// for f32, bf16 and f64 (the differential fuzzer's seed 103820, and its neighbours). Rows that do
// vary slightly around a large offset still match eager.
TEST_F(CodegenDegenerate, LayerNormOfConstantRowsIsZeroAtAnyMagnitude) {
  for (const char* dt : {"f32", "bf16", "f64"}) {
    SCOPED_TRACE(dt);
    const std::string g = fmt::format(
        "graph ln(%x: {0}[6,1,1], %o: {0}[6,9,1]) {{\n"
        "  %e: {0}[6,9,1] = expand(%x, shape=[6,9,1])\n"
        "  %a = layer_norm(%e, normalized_shape=[9,1], eps=0.001)\n"
        "  %b = layer_norm(%e, normalized_shape=[1], eps=0.001)\n"
        "  %s = add(%e, %o)\n"
        "  %c = layer_norm(%s, normalized_shape=[9,1])\n"
        "  %t = transpose(%e, dim0=1, dim1=2)\n"
        "  %d = layer_norm(%t, normalized_shape=[1,9])\n"
        "  return %a, %b, %c, %d\n}}\n",
        dt);
    const DType type = std::string(dt) == "f64"   ? DType::kF64
                       : std::string(dt) == "f32" ? DType::kF32
                                                  : DType::kBF16;
    const std::vector<double> big = {1e20, -3e15, 7.5e9, 1.0 / 3.0, -2e30, 0};
    std::vector<double> offsets(54);
    for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = 1e-3 * static_cast<double>(i % 9);
    const std::vector<Tensor> in = {Tensor::from_doubles(type, {6, 1, 1}, big),
                                    Tensor::from_doubles(type, {6, 9, 1}, offsets)};
    for (bool fusion : {true, false}) {
      SCOPED_TRACE(fusion ? "fused" : "fusion=off");
      const std::vector<Tensor> out =
          codegen_->backend().compile(parse_graph(g), options(fusion))->run(in);
      for (int k : {0, 1, 3}) {
        for (int64_t i = 0; i < out[k].numel(); ++i)
          ASSERT_EQ(out[k].get(i), 0.0) << "output " << k << " element " << i;
      }
      ExpectSameAsEager(parse_graph(g), in, options(fusion));
    }
  }
}

// The ops codegen declares decomposed (its bisection's decompose(OP) switches, codegen_config.h)
// are the ones decompose() rewrites: each, alone in a graph, leaves no node of its op, and
// -c no_decompose=OP keeps it whole. A decomposition added without the list (or listed without
// one) fails here.
TEST(CodegenDecompositions, EveryDeclaredOpIsRewrittenAndNoDecomposeKeepsIt) {
  const std::map<std::string, std::string> calls = {
      {"softmax", "softmax(%x, dim=-1)"},
      {"log_softmax", "log_softmax(%x, dim=-1)"},
      {"layer_norm", "layer_norm(%x, normalized_shape=[4], eps=1e-05)"},
      {"silu", "silu(%x)"},
      {"hardswish", "hardswish(%x)"},
      {"hardsigmoid", "hardsigmoid(%x)"},
      {"batch_norm", "batch_norm(%x, %c, %c, %c, %c, eps=1e-05)"},
  };
  std::set<std::string> listed(codegen::decomposed_ops().begin(), codegen::decomposed_ops().end());
  for (const auto& [op, call] : calls) {
    EXPECT_TRUE(listed.erase(op)) << op << " is not in decomposed_ops()";
    const Graph g = parse_graph(fmt::format(
        "graph one(%x: f32[2,3,4], %c: f32[3]) {{\n  %y = {}\n  return %y\n}}\n", call));
    auto count = [&](const Graph& d) {
      return std::count_if(d.nodes().begin(), d.nodes().end(),
                           [&](const Node& n) { return n.op == op; });
    };
    EXPECT_EQ(count(codegen::decompose(g)), 0) << op;
    EXPECT_EQ(count(codegen::decompose(g, nullptr, {}, nullptr, {op})), 1) << op;
  }
  EXPECT_TRUE(listed.empty()) << *listed.begin() << " has no case here";
}

}  // namespace
}  // namespace crucible
