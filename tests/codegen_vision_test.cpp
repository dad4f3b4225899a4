// The codegen backend against eager on vision graphs: the decomposed batch_norm and activations,
// batch_norm on odd shapes, a MobileNetV2-style block with pools, and packed convolutions that
// absorb their batch norm, residual add and relu/clamp (and the chains they must not absorb).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "accuracy.h"
#include "backend_pair.h"
#include "chain_layouts.h"
#include "crucible/ir/text_format.h"
#include "crucible/ops/packed_conv.h"
#include "crucible/plugin_loader.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::ChainName;
using testing::ChainOptions;
using testing::ExpectLayouts;

class CodegenVision : public testing::BackendPair {
 protected:
  static void ExpectSameAsEager(const Graph& g, std::vector<Tensor> inputs = {}) {
    BackendPair::ExpectSameAsEager(g, std::move(inputs), {}, /*seed=*/11);
  }
  static std::string fused_ir(const Graph& g) { return post_fusion_ir(g); }
};

// A conv2d whose weight is not a parameter cannot be packed: it stays an extern call, and its
// batch_norm is decomposed into a [C] scale/shift kernel and one pass fused with the relu.
TEST_F(CodegenVision, ConvWithInputWeightIsAnExternAndItsBatchNormOneFusedKernel) {
  const Graph g = parse_graph(R"(
graph cbr(%x: f32[2,8,11,13], %w: f32[16,8,3,3]) {
  param %gamma: f32[16] = uniform(seed=2, low=0.5, high=1.5)
  param %beta: f32[16] = randn(seed=3)
  param %mean: f32[16] = randn(seed=4)
  param %var: f32[16] = uniform(seed=5, low=0.2, high=2.0)
  %c = conv2d(%x, %w, stride=[1,1], padding=[1,1])
  %bn = batch_norm(%c, %gamma, %beta, %mean, %var, eps=0.001)
  %y = relu(%bn)
  return %y
}
)");
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::conv2d"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::"), 1) << ir;
  // The per-channel scale and shift ([16]), then x * scale + shift and the relu in one pass.
  EXPECT_EQ(count(ir, " over ["), 2) << ir;
  EXPECT_TRUE(
      std::regex_search(ir, std::regex("cpp_fused_add_mul_relu_\\d+ over \\[2,16,11,13\\]")))
      << ir;
}

TEST_F(CodegenVision, ActivationChainsFuseAndMatchEager) {
  const Graph g = parse_graph(R"(
graph act(%x: f32[37,19], %d: f64[5,33], %h: bf16[9,70], %big: f32[4,40000]) {
  %a = silu(%x)
  %b = hardswish(%a)
  %c = hardsigmoid(%b)
  %e = mul(%c, %x)
  %f = hardswish(%d)
  %g = silu(%f)
  %i = hardsigmoid(%d)
  %j = silu(%h)
  %k = hardswish(%j)
  %l = hardsigmoid(%h)
  %m = hardswish(%big)
  %n = silu(%m)
  return %e, %g, %i, %k, %l, %n
}
)");
  std::vector<Tensor> in = make_inputs(g, 5);
  // Scale some inputs past the kinks at +-3 and into exp's overflow, and plant NaN and inf.
  float* x = in[0].data<float>();
  for (int64_t i = 0; i < in[0].numel(); ++i) x[i] *= 4.0f;
  x[3] = NAN;
  x[10] = INFINITY;
  x[11] = -INFINITY;
  x[12] = -120.0f;
  in[1].data<double>()[7] = -3.0;
  in[1].data<double>()[8] = 3.0;
  ExpectSameAsEager(g, in);
  EXPECT_EQ(count(fused_ir(g), "extern::"), 0);
}

TEST_F(CodegenVision, BatchNormOnOddShapesAndDtypesMatchesEager) {
  const Graph g = parse_graph(R"(
graph bn(%x: f32[3,5,7,9], %m: f32[6,5], %r: f32[2,5,3], %h: bf16[2,5,3,7], %d: f64[1,5,3,3], %v: f32[2,5,2,3,2],
         %w: f32[5], %b: f32[5], %mu: f32[5], %var: f32[5] = uniform(low=0.1, high=3.0),
         %hw: bf16[5], %hb: bf16[5], %hmu: bf16[5], %hvar: bf16[5] = uniform(low=0.1, high=3.0),
         %dw: f64[5], %db: f64[5], %dmu: f64[5], %dvar: f64[5] = uniform(low=0.1, high=3.0)) {
  %y1 = batch_norm(%x, %w, %b, %mu, %var)
  %y2 = batch_norm(%m, %w, %b, %mu, %var, eps=0.1)
  %y3 = batch_norm(%r, %w, %b, %mu, %var)
  %y4 = batch_norm(%h, %hw, %hb, %hmu, %hvar)
  %y5 = batch_norm(%d, %dw, %db, %dmu, %dvar)
  %y6 = batch_norm(%v, %w, %b, %mu, %var)
  %z6 = hardswish(%y6)
  return %y1, %y2, %y3, %y4, %y5, %z6
}
)");
  ExpectSameAsEager(g);
  EXPECT_EQ(count(fused_ir(g), "extern::"), 0);
}

TEST_F(CodegenVision, MobileNetBlockWithExternConvsAndPoolsMatchesEager) {
  const Graph g = parse_graph(R"(
graph block(%x: f32[2,16,15,15]) {
  param %w1: f32[48,16,1,1] = randn(seed=1, std=0.25)
  param %g1: f32[48] = uniform(seed=2, low=0.5, high=1.5)
  param %b1: f32[48] = randn(seed=3, std=0.1)
  param %m1: f32[48] = randn(seed=4, std=0.1)
  param %v1: f32[48] = uniform(seed=5, low=0.5, high=1.5)
  param %w2: f32[48,1,3,3] = randn(seed=6, std=0.3)
  param %w3: f32[24,48,1,1] = randn(seed=7, std=0.2)
  param %b3: f32[24] = randn(seed=8, std=0.1)
  %e = conv2d(%x, %w1)
  %n1 = batch_norm(%e, %g1, %b1, %m1, %v1)
  %a1 = hardswish(%n1)
  %dw = conv2d(%a1, %w2, stride=[2,2], padding=[1,1], groups=48)
  %a2 = silu(%dw)
  %p = conv2d(%a2, %w3, %b3)
  %mp = max_pool2d(%p, kernel_size=[3,3], stride=[2,2], padding=[1,1], ceil_mode=true)
  %ap = avg_pool2d(%p, kernel_size=[2,2], count_include_pad=false)
  %gp = adaptive_avg_pool2d(%p, output_size=[1,1])
  %s = hardsigmoid(%gp)
  %y = mul(%p, %s)
  return %y, %mp, %ap
}
)");
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  // Each conv2d packed: the expand conv absorbs its batch norm and hardswish, the depthwise one
  // its silu; the hardsigmoid after the pool decomposes into a pointwise kernel.
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_hardswish\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_silu\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d\n"), 1) << ir;
  EXPECT_EQ(count(ir, "cpp_fused_add_clamp_div_mul_0 over"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::conv2d"), 0) << ir;
  EXPECT_EQ(count(ir, "extern::max_pool2d"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::adaptive_avg_pool2d"), 1) << ir;
}

// Parameter lines for a batch norm over `c` channels named <name>.{g,b,m,v}, statistics drawn
// away from (1, 0, 0, 1) so that a dropped or misapplied fold changes the values.
std::string BnParams(const std::string& name, int64_t c, int seed) {
  return fmt::format(
      "  param %{0}.g: f32[{1}] = uniform(seed={2}, low=0.5, high=1.5)\n"
      "  param %{0}.b: f32[{1}] = randn(seed={3}, std=0.3)\n"
      "  param %{0}.m: f32[{1}] = randn(seed={4}, std=0.3)\n"
      "  param %{0}.v: f32[{1}] = uniform(seed={5}, low=0.3, high=2.0)\n",
      name, c, seed, seed + 1, seed + 2, seed + 3);
}
std::string Bn(const std::string& out, const std::string& in, const std::string& name) {
  return fmt::format("  %{0} = batch_norm(%{1}, %{2}.g, %{2}.b, %{2}.m, %{2}.v)\n", out, in, name);
}

// NaN and inf in the input of every fused GEMM and convolution epilogue: oneDNN's relu and clip
// post-ops computed max(x, 0) with the bound as the NaN-winning operand and turned NaN into 0.
// Each activation, on each kernel path (linear on the blocked and the matmul path, a direct 3x3
// convolution, the 1x1 GEMM path, depthwise, with a folded batch norm and a residual), must keep
// NaN where eager keeps it; inf - inf inside the sums makes NaN of its own.
TEST_F(CodegenVision, NanSurvivesEveryFusedEpilogue) {
  std::string text =
      "graph nan(%x: f32[6,24], %v: f32[1,24], %c: f32[2,8,9,9]) {\n"
      "  param %w: f32[32,24] = randn(seed=1, std=0.2)\n"
      "  param %b: f32[32] = randn(seed=2, std=0.1)\n"
      "  param %k3: f32[8,8,3,3] = randn(seed=3, std=0.2)\n"
      "  param %k1: f32[16,8,1,1] = randn(seed=4, std=0.3)\n"
      "  param %kd: f32[8,1,3,3] = randn(seed=5, std=0.3)\n" +
      BnParams("bn", 8, 10);
  std::string body, outs;
  const char* acts[] = {"relu", "gelu", "sigmoid", "tanh"};
  for (const char* act : acts) {
    for (const char* in : {"x", "v"}) {  // 6 rows: blocked path; 1 row: the matmul path
      const std::string y = fmt::format("{}_{}", act, in);
      body += fmt::format("  %l_{0} = linear(%{1}, %w, %b)\n  %{0} = {2}(%l_{0})\n", y, in, act);
      outs += (outs.empty() ? "" : ", ") + ("%" + y);
    }
  }
  body +=
      "  %g = linear(%x, %w, %b)\n  %gt = gelu(%g, approximate=\"tanh\")\n"
      "  %c3 = conv2d(%c, %k3, padding=[1,1])\n  %r3 = relu(%c3)\n"
      "  %c3b = conv2d(%c, %k3, padding=[1,1])\n  %q3 = clamp(%c3b, min=0.0, max=6.0)\n"
      "  %c1 = conv2d(%c, %k1)\n  %r1 = relu(%c1)\n"
      "  %cd = conv2d(%c, %kd, padding=[1,1], groups=8)\n  %rd = clamp(%cd, min=0.0, max=6.0)\n"
      "  %cb = conv2d(%c, %k3, padding=[1,1])\n" +
      Bn("nb", "cb", "bn") + "  %sb = add(%nb, %c)\n  %rb = relu(%sb)\n";
  outs += ", %gt, %r3, %q3, %r1, %rd, %rb";
  text += body + "  return " + outs + "\n}\n";
  const Graph g = parse_graph(text);
  auto in = make_inputs(g, 4);
  const float inf = std::numeric_limits<float>::infinity();
  float* x = in[0].data<float>();
  x[0] = NAN;                         // row 0: NaN reaches every output of the row
  x[24 + 3] = inf, x[24 + 4] = -inf;  // row 1: inf - inf in the sums
  x[48 + 5] = inf;                    // row 2: +-inf outputs
  in[1].data<float>()[7] = NAN;       // the single row
  float* c = in[2].data<float>();
  c[0] = NAN;                      // image 0, channel 0, top-left
  c[81 * 3 + 40] = inf;            // channel 3, centre
  c[81 * 8 + 81 * 5 + 10] = -inf;  // image 1, channel 5
  c[81 * 8 + 81 * 6 + 70] = NAN;
  ExpectSameAsEager(g, in);
  // The NaNs are really there (a comparison of two all-zero tensors would pass too).
  auto got = codegen_->backend().compile(g, {})->run(in);
  EXPECT_TRUE(std::isnan(got[0].data<float>()[0]));  // relu(linear) of the NaN row
  const Tensor& r3 = got[9];
  EXPECT_TRUE(std::isnan(r3.data<float>()[0]));
  const std::string ir = fused_ir(g);
  EXPECT_GE(count(ir, "extern::packed_conv2d"), 4) << ir;  // the convolutions stayed fused
}

Graph ResNetBasicBlocks() {
  return parse_graph(
      "graph basic(%x: f32[2,3,19,19]) {\n"
      "  param %w0: f32[16,3,3,3] = randn(seed=1, std=0.3)\n" +
      BnParams("bn0", 16, 10) + "  param %w1: f32[16,16,3,3] = randn(seed=2, std=0.1)\n" +
      BnParams("bn1", 16, 20) + "  param %w2: f32[16,16,3,3] = randn(seed=3, std=0.1)\n" +
      BnParams("bn2", 16, 30) + "  param %w3: f32[32,16,3,3] = randn(seed=4, std=0.1)\n" +
      BnParams("bn3", 32, 40) + "  param %w4: f32[32,32,3,3] = randn(seed=5, std=0.07)\n" +
      BnParams("bn4", 32, 50) + "  param %wd: f32[32,16,1,1] = randn(seed=6, std=0.25)\n" +
      BnParams("bnd", 32, 60) + "  %c0 = conv2d(%x, %w0, padding=[1,1])\n" + Bn("n0", "c0", "bn0") +
      "  %h = relu(%n0)\n"
      "  %c1 = conv2d(%h, %w1, padding=[1,1])\n" +
      Bn("n1", "c1", "bn1") +
      "  %a = relu(%n1)\n"
      "  %c2 = conv2d(%a, %w2, padding=[1,1])\n" +
      Bn("n2", "c2", "bn2") +
      "  %s1 = add(%n2, %h)\n"
      "  %b = relu(%s1)\n"
      "  %c3 = conv2d(%b, %w3, stride=[2,2], padding=[1,1])\n" +
      Bn("n3", "c3", "bn3") +
      "  %r3 = relu(%n3)\n"
      "  %c4 = conv2d(%r3, %w4, padding=[1,1])\n" +
      Bn("n4", "c4", "bn4") + "  %cd = conv2d(%b, %wd, stride=[2,2])\n" + Bn("nd", "cd", "bnd") +
      "  %s2 = add(%n4, %nd)\n"
      "  %y = relu(%s2)\n"
      "  return %y\n}\n");
}

// Two ResNet basic blocks after a stem: the first adds its identity (the stem's output, which
// dies there, so the output takes over its buffer), the second a downsampling 1x1 conv. In the
// second, conv2's batch norm comes before the downsample conv in the graph, so the add (and the
// relu) join the downsample conv, whose residual is then computed earlier.
TEST_F(CodegenVision, ResNetBasicBlocksAreOnePackedConvEach) {
  const Graph g = ResNetBasicBlocks();
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_relu\n"), 3) << ir;      // c0, c1, c3
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_add_relu\n"), 2) << ir;  // c2, the downsample
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn\n"), 1) << ir;           // c4
  EXPECT_EQ(count(ir, "extern::"), 6) << ir;
  EXPECT_EQ(count(ir, "cpp_fused"), 0) << ir;
  EXPECT_EQ(count(ir, "= batch_norm : epilogue"), 6) << ir;
  EXPECT_EQ(count(ir, "= add : epilogue"), 2) << ir;
  EXPECT_EQ(count(ir, "= relu : epilogue"), 5) << ir;
  EXPECT_TRUE(std::regex_search(
      ir, std::regex("extern::packed_conv2d_bn_add_relu\n  %cd = conv2d[^\n]*\n  %nd = "
                     "batch_norm[^\n]*\n  %s2 = add")))
      << ir;
}

// Between packed convolutions activations keep the chain layout (NHWC, or nChw8c on CPUs without
// oneDNN's brgemm kernels): a value only convolutions read (as input or as residual) lies in it; a
// graph output, and the residual of a convolution whose output is NCHW, stay NCHW. Results match
// eager in each layout and without one, and intermediates() returns the chain's values as NCHW.
TEST_F(CodegenVision, ConvChainsKeepActivationsChannelsLast) {
  const Graph g = ResNetBasicBlocks();
  const std::pair<const char*, const char*> steps[] = {
      {"\\(%x\\) -> %h", "nchw -> C"},   {"\\(%h\\) -> %a", "C -> C"},
      {"\\(%a, %h\\) -> %b", "C -> C"},  {"\\(%b\\) -> %r3", "C -> C"},
      {"\\(%r3\\) -> %n4", "C -> nchw"}, {"\\(%b, %n4\\) -> %y", "C -> nchw"},
  };
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    ExpectLayouts(debug_artifact(g, "schedule.txt", ChainOptions(chain)), chain, steps);
    BackendPair::ExpectSameAsEager(g, {}, ChainOptions(chain), 11);
  }
  // auto: the layout this CPU prefers.
  ExpectLayouts(debug_artifact(g, "schedule.txt"),
                preferred_chain_layout() == ActivationLayout::kNhwc ? "nhwc" : "nchw8c", steps);
  plugin::Options off;
  off.config["channels_last"] = "off";
  EXPECT_EQ(count(debug_artifact(g, "schedule.txt", off), " layout "), 0);
  BackendPair::ExpectSameAsEager(g, {}, off, 11);
  const std::vector<Tensor> in = make_inputs(g, 5);
  std::vector<ValueId> ids;
  std::vector<std::string> names;
  for (const char* v : {"h", "b", "r3", "n4", "y"}) {
    ids.push_back(*g.find_value(v));
    names.push_back(std::string("%") + v);
  }
  const auto want = eager_->backend().compile(g, {})->intermediates(in, ids);
  // Held to eager at 1e-5, or else by the harness's rule against fp64, as ExpectSameAsEager does:
  // `fastest` times Winograd against the direct kernel, so a loaded machine may pick either, and
  // Winograd's rounding passed 1e-5 of eager on %n4 (2.0e-5) under ctest -j2.
  const Graph wide = widen_to_f64(g);
  std::vector<ValueId> wide_ids;
  for (const std::string& n : names) wide_ids.push_back(*wide.find_value(n.substr(1)));
  auto fp64 = [&] {
    return eager_->backend().compile(wide, {})->intermediates(widen_inputs_to_f64(in), wide_ids);
  };
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    ExpectTensorsMatch(codegen_->backend().compile(g, ChainOptions(chain))->intermediates(in, ids),
                       want, names, fp64);
  }
}

// nChw8c holds whole blocks of 8 channels only: a chain through 12-channel values keeps them NCHW
// and blocks the 16-channel ones; NHWC takes every value.
TEST_F(CodegenVision, BlockedChainsSkipPartialChannelBlocks) {
  const Graph g = parse_graph(
      "graph twelve(%x: f32[2,3,11,11]) {\n"
      "  param %w0: f32[12,3,3,3] = randn(seed=1, std=0.3)\n"
      "  param %w1: f32[12,12,3,3] = randn(seed=2, std=0.15)\n"
      "  param %w2: f32[16,12,3,3] = randn(seed=3, std=0.15)\n"
      "  param %w3: f32[16,16,3,3] = randn(seed=4, std=0.15)\n"
      "  param %w4: f32[8,16,3,3] = randn(seed=5, std=0.15)\n"
      "  %a = conv2d(%x, %w0, padding=[1,1])\n"
      "  %b = conv2d(%a, %w1, padding=[1,1])\n"
      "  %c = conv2d(%b, %w2, padding=[1,1])\n"
      "  %d = conv2d(%c, %w3, padding=[1,1])\n"
      "  %y = conv2d(%d, %w4, padding=[1,1])\n"
      "  return %y\n}\n");
  const std::string blocked = debug_artifact(g, "schedule.txt", ChainOptions("nchw8c"));
  EXPECT_EQ(count(blocked, "(%x) -> %a weight %w0\n"), 1) << blocked;
  EXPECT_EQ(count(blocked, "(%a) -> %b weight %w1\n"), 1) << blocked;
  EXPECT_EQ(count(blocked, "(%b) -> %c weight %w2 layout nchw -> nChw8c\n"), 1) << blocked;
  EXPECT_EQ(count(blocked, "(%c) -> %d weight %w3 layout nChw8c -> nChw8c\n"), 1) << blocked;
  EXPECT_EQ(count(blocked, "(%d) -> %y weight %w4 layout nChw8c -> nchw\n"), 1) << blocked;
  EXPECT_EQ(count(debug_artifact(g, "schedule.txt", ChainOptions("nhwc")), " layout "), 5);
  for (const std::string chain : {"nhwc", "nchw8c"})
    BackendPair::ExpectSameAsEager(g, {}, ChainOptions(chain), 3);
}

// Winograd on every 3x3 stride-1 convolution (conv_algorithm=winograd; the default times it first)
// matches eager, and with a NaN and an infinity in the input the convolutions they reach take the
// direct kernel, so eager's NaN and infinity pattern comes out.
TEST_F(CodegenVision, WinogradConvolutionsMatchEager) {
  const Graph g = ResNetBasicBlocks();
  plugin::Options wino;
  wino.config["conv_algorithm"] = "winograd";
  BackendPair::ExpectSameAsEager(g, {}, wino, 11);
  std::vector<Tensor> in = make_inputs(g, 12);
  in[0].data<float>()[19 * 19 + 40] = NAN;
  in[0].data<float>()[3 * 19 * 19 + 100] = INFINITY;
  BackendPair::ExpectSameAsEager(g, in, wino);
  plugin::Options direct;
  direct.config["conv_algorithm"] = "direct";
  BackendPair::ExpectSameAsEager(g, in, direct);
}

// A 1x1 convolution on an NCHW input (a generated kernel's output, DenseNet's wide concatenated
// features) writes NCHW: oneDNN would reorder the wide input otherwise. The 3x3 after it writes
// NHWC for the next 3x3; the last convolution's output is returned, NCHW.
TEST_F(CodegenVision, PointwiseConvOnNchwInputWritesNchw) {
  const Graph g = parse_graph(
      "graph dense(%x: f32[2,64,9,9]) {\n"
      "  param %w1: f32[16,64,1,1] = randn(seed=1, std=0.1)\n"
      "  param %w2: f32[8,16,3,3] = randn(seed=2, std=0.1)\n"
      "  param %w3: f32[8,8,3,3] = randn(seed=3, std=0.1)\n"
      "  %r = relu(%x)\n"
      "  %c1 = conv2d(%r, %w1)\n"
      "  %c2 = conv2d(%c1, %w2, padding=[1,1])\n"
      "  %c3 = conv2d(%c2, %w3, padding=[1,1])\n"
      "  return %c3\n}\n");
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    BackendPair::ExpectSameAsEager(g, {}, ChainOptions(chain));
    const std::string sched = debug_artifact(g, "schedule.txt", ChainOptions(chain));
    EXPECT_EQ(count(sched, "(%r) -> %c1 weight %w1\n"), 1) << sched;
    const std::string name = ChainName(chain);
    EXPECT_EQ(count(sched, "(%c1) -> %c2 weight %w2 layout nchw -> " + name + "\n"), 1) << sched;
    EXPECT_EQ(count(sched, "(%c2) -> %c3 weight %w3 layout " + name + " -> nchw\n"), 1) << sched;
  }
}

// A max pool between convolutions runs on their NHWC buffers (ResNet's stem pool, whose output is
// the first block's identity), NaN included; a pool whose output is returned stays NCHW, and the
// convolution feeding it writes NCHW.
TEST_F(CodegenVision, MaxPoolBetweenConvolutionsRunsChannelsLast) {
  const Graph g = parse_graph(
      "graph stem(%x: f32[2,3,20,20]) {\n"
      "  param %w0: f32[16,3,3,3] = randn(seed=1, std=0.3)\n" +
      BnParams("bn0", 16, 10) + "  param %w1: f32[16,16,3,3] = randn(seed=2, std=0.1)\n" +
      BnParams("bn1", 16, 20) + "  param %w2: f32[16,16,1,1] = randn(seed=3, std=0.2)\n" +
      BnParams("bn2", 16, 30) + "  param %w3: f32[8,16,3,3] = randn(seed=4, std=0.1)\n" +
      "  %c0 = conv2d(%x, %w0, padding=[1,1])\n" + Bn("n0", "c0", "bn0") +
      "  %h = relu(%n0)\n"
      "  %m = max_pool2d(%h, kernel_size=[3,3], stride=[2,2], padding=[1,1])\n"
      "  %c1 = conv2d(%m, %w1, padding=[1,1])\n" +
      Bn("n1", "c1", "bn1") +
      "  %a = relu(%n1)\n"
      "  %c2 = conv2d(%a, %w2)\n" +
      Bn("n2", "c2", "bn2") +
      "  %s = add(%n2, %m)\n"
      "  %b = relu(%s)\n"
      "  %p = max_pool2d(%b, kernel_size=[2,2], stride=[2,2], ceil_mode=true)\n"
      "  %y = conv2d(%p, %w3, padding=[1,1])\n"
      "  %q = max_pool2d(%y, kernel_size=[2,2])\n"
      "  return %q\n}\n");
  std::vector<Tensor> in = make_inputs(g, 4);
  in[0].data<float>()[3 * 20 + 7] = NAN;  // image 0, channel 0: through the stem into the pools
  const std::pair<const char*, const char*> steps[] = {
      {"conv2d_bn_relu\\(%x\\) -> %h", "nchw -> C"},
      {"max_pool2d\\(%h\\) -> %m", "C -> C"},
      {"\\(%a, %m\\) -> %b", "C -> C"},
      {"max_pool2d\\(%b\\) -> %p", "C -> C"},
      {"conv2d\\(%p\\) -> %y", "C -> nchw"},
  };
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    BackendPair::ExpectSameAsEager(g, in, ChainOptions(chain));
    const std::string sched = debug_artifact(g, "schedule.txt", ChainOptions(chain));
    ExpectLayouts(sched, chain, steps);
    EXPECT_EQ(count(sched, "max_pool2d(%y) -> %q\n"), 1) << sched;  // returned: NCHW
    auto got = codegen_->backend().compile(g, ChainOptions(chain))->run(in);
    EXPECT_TRUE(std::isnan(got[0].data<float>()[0])) << "the NaN pixel's window at image 0";
  }
}

// A ResNet-50 bottleneck with an identity shortcut: 1x1 (GEMM path), 3x3 (direct kernel), 1x1
// with the residual add, whose identity dies there (the sum lands in its buffer).
TEST_F(CodegenVision, ResNetBottleneckIsFourPackedConvs) {
  const Graph g = parse_graph(
      "graph bottleneck(%x: f32[2,3,15,15]) {\n"
      "  param %w0: f32[32,3,3,3] = randn(seed=1, std=0.3)\n" +
      BnParams("bn0", 32, 10) + "  param %w1: f32[8,32,1,1] = randn(seed=2, std=0.2)\n" +
      BnParams("bn1", 8, 20) + "  param %w2: f32[8,8,3,3] = randn(seed=3, std=0.15)\n" +
      BnParams("bn2", 8, 30) + "  param %w3: f32[32,8,1,1] = randn(seed=4, std=0.3)\n" +
      BnParams("bn3", 32, 40) + "  %c0 = conv2d(%x, %w0, padding=[1,1])\n" + Bn("n0", "c0", "bn0") +
      "  %h = relu(%n0)\n"
      "  %c1 = conv2d(%h, %w1)\n" +
      Bn("n1", "c1", "bn1") +
      "  %a = relu(%n1)\n"
      "  %c2 = conv2d(%a, %w2, padding=[1,1])\n" +
      Bn("n2", "c2", "bn2") +
      "  %b = relu(%n2)\n"
      "  %c3 = conv2d(%b, %w3)\n" +
      Bn("n3", "c3", "bn3") +
      "  %s = add(%n3, %h)\n"
      "  %y = relu(%s)\n"
      "  return %y\n}\n");
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_relu\n"), 3) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_add_relu\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::"), 4) << ir;
  EXPECT_EQ(count(ir, "cpp_fused"), 0) << ir;
}

// MobileNetV2's inverted residual after a stem; with `head`, a 1x1 convolution reads its output.
Graph InvertedResidual(bool head) {
  return parse_graph(
      "graph inverted(%x: f32[3,16,9,9]) {\n"
      "  param %w0: f32[16,16,3,3] = randn(seed=1, std=0.15)\n" +
      BnParams("bn0", 16, 10) + "  param %we: f32[96,16,1,1] = randn(seed=2, std=0.3)\n" +
      BnParams("bne", 96, 20) + "  param %wd: f32[96,1,3,3] = randn(seed=3, std=0.5)\n" +
      BnParams("bnd", 96, 30) + "  param %wp: f32[16,96,1,1] = randn(seed=4, std=0.15)\n" +
      BnParams("bnp", 16, 40) + "  %c0 = conv2d(%x, %w0, padding=[1,1])\n" + Bn("n0", "c0", "bn0") +
      "  %h = clamp(%n0, min=0.0, max=6.0)\n"
      "  %ce = conv2d(%h, %we)\n" +
      Bn("ne", "ce", "bne") +
      "  %e = clamp(%ne, min=0.0, max=6.0)\n"
      "  %cd = conv2d(%e, %wd, padding=[1,1], groups=96)\n" +
      Bn("nd", "cd", "bnd") +
      "  %d = clamp(%nd, min=0.0, max=6.0)\n"
      "  %cp = conv2d(%d, %wp)\n" +
      Bn("np", "cp", "bnp") + "  %y = add(%h, %np)\n" +
      (head ? "  param %wz: f32[8,16,1,1] = randn(seed=5, std=0.2)\n"
              "  %z = conv2d(%y, %wz)\n"
              "  return %z\n}\n"
            : "  return %y\n}\n"));
}

// MobileNetV2's inverted residual: 1x1 expand + ReLU6, depthwise 3x3 + ReLU6 (our direct loop),
// linear 1x1 projection whose add (identity first) has no activation after it.
TEST_F(CodegenVision, MobileNetInvertedResidualIsFourPackedConvs) {
  const Graph g = InvertedResidual(false);
  std::vector<Tensor> in = make_inputs(g, 3);
  float* x = in[0].data<float>();
  for (int64_t i = 0; i < in[0].numel(); ++i) x[i] *= 4.0f;  // past ReLU6's upper bound too
  ExpectSameAsEager(g, in);
  // The projection is returned (NCHW), so its identity is NCHW, and the stem writing it; the
  // expand convolution reads NCHW so writes NCHW, and the depthwise one keeps its layout.
  EXPECT_EQ(count(debug_artifact(g, "schedule.txt"), " layout "), 0);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_clamp\n"), 3) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_add\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::"), 4) << ir;
  EXPECT_EQ(count(ir, "cpp_fused"), 0) << ir;
}

// EfficientNet's and MobileNetV3's blocks: silu as exporters write it (mul(v, sigmoid(v)), either
// operand order) and as one op, hardswish, and the squeeze-excite gate's sigmoid and hardsigmoid
// all run inside their convolution's call; a silu whose input has a third reader stays a kernel.
TEST_F(CodegenVision, MobileActivationsRunInsideTheirConvolution) {
  const Graph g = parse_graph(
      "graph mobile(%x: f32[2,16,10,10]) {\n"
      "  param %we: f32[48,16,1,1] = randn(seed=1, std=0.3)\n"
      "  param %wd: f32[48,1,3,3] = randn(seed=2, std=0.3)\n"
      "  param %ws: f32[8,48,1,1] = randn(seed=3, std=0.3)\n"
      "  param %bs: f32[8] = randn(seed=4, std=0.3)\n"
      "  param %wx: f32[48,8,1,1] = randn(seed=5, std=0.3)\n"
      "  param %bx: f32[48] = randn(seed=6, std=0.3)\n"
      "  param %wp: f32[16,48,1,1] = randn(seed=7, std=0.3)\n"
      "  param %wq: f32[16,16,1,1] = randn(seed=8, std=0.3)\n"
      "  %ce = conv2d(%x, %we)\n" +
      BnParams("bne", 48, 10) + Bn("ne", "ce", "bne") +
      "  %se = sigmoid(%ne)\n"
      "  %e = mul(%se, %ne)\n"
      "  %cd = conv2d(%e, %wd, padding=[1,1], groups=48)\n"
      "  %d = hardswish(%cd)\n"
      "  %m = mean(%d, dims=[2,3], keepdim=true)\n"
      "  %cs = conv2d(%m, %ws, %bs)\n"
      "  %s = silu(%cs)\n"
      "  %cx = conv2d(%s, %wx, %bx)\n"
      "  %gate = sigmoid(%cx)\n"
      "  %gd = mul(%d, %gate)\n"
      "  %cp = conv2d(%gd, %wp)\n"
      "  %hp = hardsigmoid(%cp)\n"
      "  %cq = conv2d(%hp, %wq)\n"
      "  %sq = sigmoid(%cq)\n"
      "  %y = mul(%cq, %sq)\n"
      "  %z = add(%y, %cq)\n"
      "  return %z\n}\n");
  std::vector<Tensor> in = make_inputs(g, 5);
  float* x = in[0].data<float>();
  for (int64_t i = 0; i < in[0].numel(); ++i) x[i] *= 4.0f;  // across hardswish's kinks too
  x[7] = NAN;
  ExpectSameAsEager(g, in);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn_silu\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_hardswish\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_silu\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_sigmoid\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d_hardsigmoid\n"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::packed_conv2d\n"), 1) << ir;  // %cq: read thrice
}

// With a convolution after the block, the whole block runs channels-inner under either chain
// layout, the depthwise convolution on our channels-inner loop (ReLU6 and NaN as eager has them,
// on 16-lane NHWC or 8-lane nChw8c vectors); the head writes NCHW.
TEST_F(CodegenVision, MobileNetBlockRunsChannelsLast) {
  const Graph g = InvertedResidual(true);
  std::vector<Tensor> in = make_inputs(g, 3);
  float* x = in[0].data<float>();
  for (int64_t i = 0; i < in[0].numel(); ++i) x[i] *= 4.0f;  // past ReLU6's upper bound too
  x[40] = NAN;
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    SCOPED_TRACE(chain);
    BackendPair::ExpectSameAsEager(g, in, ChainOptions(chain));
    const std::string name = chain == "nhwc" ? "nhwc" : "nChw8c";
    const std::string sched = debug_artifact(g, "schedule.txt", ChainOptions(chain));
    // expand, depthwise, project
    EXPECT_EQ(count(sched, " layout " + name + " -> " + name + "\n"), 3) << sched;
    EXPECT_EQ(count(sched, "(%x) -> %h weight %w0 layout nchw -> " + name + "\n"), 1) << sched;
    EXPECT_EQ(count(sched, "(%y) -> %z weight %wz layout " + name + " -> nchw\n"), 1) << sched;
    auto got = codegen_->backend().compile(g, ChainOptions(chain))->run(in);
    int nans = 0;
    for (int64_t i = 0; i < got[0].numel(); ++i)
      nans += std::isnan(got[0].data<float>()[i]) ? 1 : 0;
    EXPECT_GT(nans, 0) << "the NaN pixel reaches the head";
  }
}

// Values the packed call would not materialize end the chain: a batch norm output that is also a
// graph output, a conv output with a second reader or returned itself. Their relu and batch
// norms then run as kernels; every output matches eager.
TEST_F(CodegenVision, ChainStopsAtValuesNeededOutsideIt) {
  const Graph g = parse_graph(
      "graph stops(%x: f32[2,16,10,10]) {\n"
      "  param %w1: f32[16,16,3,3] = randn(seed=1, std=0.1)\n" +
      BnParams("bn1", 16, 10) + "  param %w2: f32[16,16,1,1] = randn(seed=2, std=0.25)\n" +
      BnParams("bn2", 16, 20) + "  param %w3: f32[16,16,1,1] = randn(seed=3, std=0.25)\n" +
      BnParams("bn3", 16, 30) + "  %c1 = conv2d(%x, %w1, padding=[1,1])\n" + Bn("n1", "c1", "bn1") +
      "  %r1 = relu(%n1)\n"
      "  %c2 = conv2d(%r1, %w2)\n" +
      Bn("n2", "c2", "bn2") +
      "  %r2 = relu(%n2)\n"
      "  %t2 = tanh(%c2)\n"
      "  %c3 = conv2d(%r2, %w3)\n" +
      Bn("n3", "c3", "bn3") +
      "  %r3 = relu(%n3)\n"
      "  return %n1, %r1, %t2, %r3, %c3\n}\n");
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  // c1 absorbs its batch norm (the step's output is %n1) but not the relu after it.
  EXPECT_TRUE(std::regex_search(
      ir, std::regex("extern::packed_conv2d_bn\n  %c1 = conv2d[^\n]*\n  %n1 = batch_norm")))
      << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex("%r1 = relu : pointwise"))) << ir;
  // c2's output is read twice and c3's is returned: both convs packed alone, their batch norms
  // decomposed into pointwise kernels.
  EXPECT_EQ(count(ir, "extern::packed_conv2d\n"), 2) << ir;
  EXPECT_EQ(count(ir, "batch_norm"), 1) << ir;
  EXPECT_EQ(count(ir, " : epilogue"), 1) << ir;
}

// Patterns the packed call cannot take: a batch norm with an input weight, a broadcasting or
// later-computed residual, a residual that is the conv's own input (allowed: it must not be
// overwritten while the conv reads it), a one-sided clamp, an f64 conv.
TEST_F(CodegenVision, OnlyFoldablePatternsAreAbsorbed) {
  const Graph g = parse_graph(
      "graph patterns(%x: f32[2,16,8,8], %gamma: f32[16], %bias: f32[1,16,1,1],\n"
      "               %d: f64[1,4,6,6]) {\n"
      "  param %w1: f32[16,16,3,3] = randn(seed=1, std=0.1)\n" +
      BnParams("bn1", 16, 10) + "  param %w2: f32[16,16,3,3] = randn(seed=2, std=0.1)\n" +
      BnParams("bn2", 16, 20) + "  param %w3: f32[16,16,1,1] = randn(seed=3, std=0.25)\n" +
      BnParams("bn3", 16, 30) + "  param %w4: f32[16,16,1,1] = randn(seed=4, std=0.25)\n" +
      "  param %w5: f32[16,16,3,3] = randn(seed=5, std=0.1)\n" +
      "  param %wd: f64[4,4,3,3] = randn(seed=6, std=0.2)\n" +
      "  %h = relu(%x)\n"
      "  %c1 = conv2d(%h, %w1, padding=[1,1])\n"
      "  %n1 = batch_norm(%c1, %gamma, %bn1.b, %bn1.m, %bn1.v)\n"
      "  %c2 = conv2d(%n1, %w2, padding=[1,1])\n" +
      Bn("n2", "c2", "bn2") +
      "  %a2 = add(%n2, %bias)\n"
      "  %c3 = conv2d(%a2, %w3)\n" +
      Bn("n3", "c3", "bn3") +
      "  %later = relu(%a2)\n"
      "  %a3 = add(%n3, %later)\n"
      "  %c4 = conv2d(%a3, %w4)\n"
      "  %a4 = add(%c4, %a3)\n"
      "  %r4 = relu(%a4)\n"
      "  %c5 = conv2d(%r4, %w5, padding=[1,1])\n"
      "  %y5 = clamp(%c5, min=0.0)\n"
      "  %yd = conv2d(%d, %wd)\n"
      "  return %y5, %yd\n}\n");
  ExpectSameAsEager(g);
  const std::string ir = fused_ir(g);
  EXPECT_EQ(count(ir, "extern::packed_conv2d\n"), 2) << ir;           // c1, c5
  EXPECT_EQ(count(ir, "extern::packed_conv2d_bn\n"), 2) << ir;        // c2, c3
  EXPECT_EQ(count(ir, "extern::packed_conv2d_add_relu\n"), 1) << ir;  // c4, residual = its input
  EXPECT_EQ(count(ir, "extern::conv2d"), 1) << ir;                    // the f64 one
  EXPECT_EQ(count(ir, "= batch_norm : epilogue"), 2) << ir;
  EXPECT_EQ(count(ir, "= add : epilogue"), 1) << ir;
}

// Profiles name each packed call by what it absorbed.
TEST_F(CodegenVision, ProfileNamesPackedConvolutions) {
  const Graph g = parse_graph(
      "graph named(%x: f32[1,8,6,6]) {\n"
      "  param %w: f32[8,8,3,3] = randn(seed=1, std=0.2)\n" +
      BnParams("bn", 8, 10) + "  %c = conv2d(%x, %w, padding=[1,1])\n" + Bn("n", "c", "bn") +
      "  %s = add(%n, %x)\n"
      "  %y = relu(%s)\n"
      "  return %y\n}\n");
  // Winograd, whose roofline fraction may pass 100% (it skips most of the counted multiplications),
  // says so in the name.
  for (const std::string algorithm : {"direct", "winograd"}) {
    plugin::Options opts;
    opts.profile = true;
    opts.config["conv_algorithm"] = algorithm;
    auto exe = codegen_->backend().compile(g, opts);
    exe->run(make_inputs(g, 1));
    const auto stats = exe->profile();
    ASSERT_EQ(stats.size(), 1u);
    EXPECT_EQ(stats[0].name, algorithm == "direct"
                                 ? "extern::packed_conv2d_bn_add_relu[3x3]"
                                 : "extern::packed_conv2d_bn_add_relu[3x3 winograd]");
    EXPECT_EQ(stats[0].calls, 1);
  }
}

// ... and by its geometry, so a profile tells a network's depthwise layers from its pointwise ones:
// depthwise or grouped, the kernel, then stride and dilation when not 1. Two layers of one
// geometry share a row.
TEST_F(CodegenVision, ProfileNamesCarryTheConvolutionsGeometry) {
  const Graph g = parse_graph(
      "graph geo(%x: f32[1,8,12,12]) {\n"
      "  param %wd: f32[8,1,5,5] = randn(seed=1, std=0.2)\n"
      "  param %wp: f32[16,8,1,1] = randn(seed=2, std=0.2)\n"
      "  param %wq: f32[16,16,1,1] = randn(seed=3, std=0.2)\n"
      "  param %wg: f32[16,4,3,3] = randn(seed=4, std=0.2)\n"
      "  %d = conv2d(%x, %wd, stride=[2,2], padding=[2,2], groups=8)\n"
      "  %p = conv2d(%d, %wp)\n"
      "  %q = conv2d(%p, %wq)\n"
      "  %r = conv2d(%q, %wg, padding=[2,2], dilation=[2,2], groups=4)\n"
      "  return %r\n}\n");
  plugin::Options opts;
  opts.profile = true;
  auto exe = codegen_->backend().compile(g, opts);
  exe->run(make_inputs(g, 1));
  std::map<std::string, int64_t> calls;
  for (const auto& s : exe->profile()) calls[s.name] += s.calls;
  EXPECT_EQ(calls["extern::packed_conv2d[dw5x5/s2]"], 1);
  EXPECT_EQ(calls["extern::packed_conv2d[1x1]"], 2);
  EXPECT_EQ(calls["extern::packed_conv2d[g4 3x3 d2]"], 1);
}

}  // namespace
}  // namespace crucible
