// Executable::intermediates on the codegen backend: every value of the graph, including those fused
// away inside kernels or GEMM epilogues, equals eager's, and the fusion of the variant is
// unchanged.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "accuracy.h"
#include "backend_pair.h"
#include "codegen/passes.h"
#include "crucible/codegen/program.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_loader.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

// softmax(x * s + mask), a hand-written softmax with its row scalars as graph values, and
// gelu(layer_norm(x + r)) * w: each chain one fused row kernel.
constexpr const char* kRows = R"(graph rows(%x: f32[64,300], %mask: f32[300], %r: f32[64,300]) {
  param %w: f32[300] = randn(seed=1, std=0.5)
  param %b: f32[300] = randn(seed=2, std=0.5)
  %s = full(shape=[], value=0.125)
  %a = mul(%x, %s)
  %l = add(%a, %mask)
  %y = softmax(%l, dim=-1)
  %m = amax(%x, dims=[-1], keepdim=true)
  %c = sub(%x, %m)
  %e = exp(%c)
  %z = sum(%e, dims=[-1], keepdim=true)
  %p = div(%e, %z)
  %h = add(%x, %r)
  %n = layer_norm(%h, %w, %b, normalized_shape=[300], eps=1e-05)
  %g = gelu(%n)
  %o = mul(%g, %w)
  return %y, %p, %o
}
)";

// Softmax spelled out, alone in its kernel: the final pass reads the exp back from the stash.
constexpr const char* kStash = R"(graph stash(%x: f32[40,77]) {
  %m = amax(%x, dims=[-1], keepdim=true)
  %c = sub(%x, %m)
  %e = exp(%c)
  %z = sum(%e, dims=[-1], keepdim=true)
  %p = div(%e, %z)
  return %p
}
)";

class CodegenIntermediates : public testing::BackendPair {
 protected:
  static std::vector<ValueId> all_values(const Graph& g) {
    std::vector<ValueId> ids(g.values().size());
    std::iota(ids.begin(), ids.end(), 0);
    return ids;
  }

  // Asks both backends for `ids` and compares each value.
  static void ExpectIntermediatesMatchEager(const Graph& g, const std::vector<ValueId>& ids,
                                            plugin::Executable& codegen) {
    auto in = make_inputs(g, 3);
    auto ref = eager_->backend().compile(g, {})->intermediates(in, ids);
    auto got = codegen.intermediates(in, ids);
    std::vector<std::string> names;
    for (ValueId v : ids) names.push_back(fmt::format("value %{}", g.value(v).name));
    ExpectTensorsMatch(got, ref, names);
  }
};

TEST_F(CodegenIntermediates, EveryValueOfFusedRowKernelsMatchesEager) {
  const Graph g = parse_graph(kRows);
  const std::string ir = post_fusion_ir(g);
  // The three chains are one kernel each, so their inner values live in no buffer of run().
  ASSERT_EQ(ir.find("extern::"), std::string::npos) << ir;
  ASSERT_NE(ir.find("# buffers"), std::string::npos);
  auto exe = codegen_->backend().compile(g, {});
  const auto in = make_inputs(g, 3);
  const auto before = exe->run(in);
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
  // Inner values alone, in another order and with a repeat: a second variant, same answers.
  const std::vector<ValueId> inner{*g.find_value("e"), *g.find_value("a"), *g.find_value("n"),
                                   *g.find_value("m"), *g.find_value("e"), *g.find_value("z")};
  ExpectIntermediatesMatchEager(g, inner, *exe);
  ExpectIntermediatesMatchEager(g, inner, *exe);  // from the cached variant
  const Graph st = parse_graph(kStash);
  ExpectIntermediatesMatchEager(st, all_values(st), *codegen_->backend().compile(st, {}));
  // The executable itself is untouched by its variants.
  const auto after = exe->run(in);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(identical(before[i], after[i]));
}

// The variant keeping every value has the same kernels (names, so the same fused ops) as the
// program itself; the kept values are extra outputs of those kernels.
TEST_F(CodegenIntermediates, KeepingValuesLeavesTheFusionAsItIs) {
  const Graph g = parse_graph(kRows);
  codegen::CodegenOptions plain, kept;
  kept.keep = all_values(g);
  const codegen::Program p = codegen::build_program(g, plain);
  const codegen::Program v = codegen::build_program(g, kept);
  ASSERT_EQ(p.steps.size(), v.steps.size());
  std::set<ValueId> stored;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(p.steps[i].name, v.steps[i].name);
    stored.insert(v.steps[i].outputs.begin(), v.steps[i].outputs.end());
  }
  EXPECT_EQ(p.steps.size(), 1u);  // horizontal fusion joins the three chains
  for (const Node& n : g.nodes()) {
    if (n.op == "full") continue;  // inlined constants are evaluated by the runtime
    EXPECT_TRUE(stored.contains(v.value_of[n.output])) << g.value(n.output).name;
  }  // Extra stores leave the softmax's stash in place.
  const Graph st = parse_graph(kStash);
  const codegen::Program sp = codegen::build_program(st, plain);
  kept.keep = all_values(st);
  const codegen::Program sv = codegen::build_program(st, kept);
  ASSERT_EQ(sp.sources.size(), 1u);
  ASSERT_EQ(sv.sources.size(), 1u);
  EXPECT_NE(sp.sources[0].find("// stash %e"), std::string::npos) << sp.sources[0];
  EXPECT_NE(sv.sources[0].find("// stash %e"), std::string::npos) << sv.sources[0];
  EXPECT_NE(sv.sources[0].find("// store %c"), std::string::npos) << sv.sources[0];
}

TEST_F(CodegenIntermediates, ValuesInsidePackedLinearEpiloguesMatchEager) {
  const Graph g = parse_graph(R"(graph mlp(%x: f32[33,64]) {
  param %w1: f32[48,64] = randn(seed=1, std=0.1)
  param %b1: f32[48] = randn(seed=2, std=0.1)
  param %w2: f32[48,16] = randn(seed=3, std=0.1)
  %h = linear(%x, %w1, %b1)
  %a = relu(%h)
  %o = matmul(%a, %w2)
  %g = gelu(%o)
  %t = tanh(%g)
  return %t
}
)");
  ASSERT_NE(post_fusion_ir(g).find("extern::packed_linear_gelu"), std::string::npos);
  auto exe = codegen_->backend().compile(g, {});
  ExpectIntermediatesMatchEager(g, {*g.find_value("h"), *g.find_value("o")}, *exe);
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
}

// %a is planned to be overwritten in place by %d (its last reader): returning it must prevent that.
TEST_F(CodegenIntermediates, AValueOverwrittenInPlaceIsReturnedIntact) {
  const Graph g = parse_graph(R"(graph inplace(%x: f32[4,8]) {
  param %w: f32[8,8] = randn(seed=1, std=0.3)
  %a = exp(%x)
  %h = linear(%a, %w)
  %d = add(%a, %h)
  return %d
}
)");
  const std::string ir = post_fusion_ir(g);
  ASSERT_NE(ir.find("(in place of %a)"), std::string::npos) << ir;
  auto exe = codegen_->backend().compile(g, {});
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
}

// A packed convolution absorbs its batch norm, residual add and relu; asked for, each of those
// values must come back as eager computes it (the chain then stops before a kept value).
TEST_F(CodegenIntermediates, ValuesInsidePackedConvChainsMatchEager) {
  const Graph g = parse_graph(R"(graph block(%x: f32[2,4,6,6]) {
  param %w: f32[4,4,3,3] = randn(seed=1, std=0.3)
  param %g: f32[4] = uniform(seed=2, low=0.8, high=1.2)
  param %b: f32[4] = uniform(seed=3, low=-0.1, high=0.1)
  param %m: f32[4] = uniform(seed=4, low=-0.1, high=0.1)
  param %v: f32[4] = uniform(seed=5, low=0.8, high=1.2)
  %c = conv2d(%x, %w, padding=[1, 1])
  %n = batch_norm(%c, %g, %b, %m, %v, eps=1e-05)
  %a = add(%n, %x)
  %y = relu(%a)
  return %y
}
)");
  ASSERT_NE(post_fusion_ir(g).find("packed_conv2d_bn_add_relu"), std::string::npos)
      << post_fusion_ir(g);
  auto exe = codegen_->backend().compile(g, {});
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
  for (const char* name : {"c", "n", "a"}) {
    SCOPED_TRACE(name);
    ExpectIntermediatesMatchEager(g, {*g.find_value(name)}, *exe);
  }
}

// The tutorial's neg on [1,8] is recomputed across maximum's [8390,8]: a kept %a is computed by
// a kernel of its own [1,8] instead, since a broadcast iteration would store it 8390 times over.
TEST_F(CodegenIntermediates, AWidenedValueMatchesEager) {
  const Graph g =
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/neg_maximum_cat_u8.graph");
  codegen::CodegenOptions kept;
  kept.keep = {*g.find_value("a")};
  const codegen::Program v = codegen::build_program(g, kept);
  ASSERT_EQ(v.steps.size(), 2u);
  EXPECT_EQ(v.steps[0].name, "cpp_fused_neg_0");
  EXPECT_EQ(v.steps[0].outputs, std::vector<ValueId>{v.value_of[*g.find_value("a")]});
  EXPECT_EQ(codegen::build_program(g, {}).steps.size(), 1u);  // cpp_fused_cat_maximum_neg_0
  auto exe = codegen_->backend().compile(g, {});
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
}

TEST_F(CodegenIntermediates, BF16AndDecomposedActivationsMatchEager) {
  const Graph g = parse_graph(R"(graph act(%x: bf16[16,40], %v: f32[16,40]) {
  %a = silu(%x)
  %b = hardswish(%a)
  %y = softmax(%b, dim=1)
  %c = hardsigmoid(%v)
  %d = log_softmax(%c, dim=-1)
  return %y, %d
}
)");
  auto exe = codegen_->backend().compile(g, {});
  ExpectIntermediatesMatchEager(g, all_values(g), *exe);
}

TEST_F(CodegenIntermediates, AnIdOutsideTheGraphIsAClearError) {
  const Graph g = parse_graph(kRows);
  auto exe = codegen_->backend().compile(g, {});
  const auto in = make_inputs(g, 3);
  for (ValueId bad : {ValueId{-1}, static_cast<ValueId>(g.values().size()), ValueId{1 << 30}}) {
    const std::vector<ValueId> ids{*g.find_value("a"), bad};
    try {
      exe->intermediates(in, ids);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find(fmt::format("value id {} is not a value of graph rows", bad)),
          std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace crucible
