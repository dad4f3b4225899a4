// The codegen backend against eager on vision graphs: conv2d -> batch_norm -> relu (the batch_norm
// decomposed and fused with the relu), the decomposed activations, batch_norm on odd shapes, and
// a MobileNetV2-style block whose convolutions and pools run as extern calls.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "accuracy.h"
#include "crucible/ir/text_format.h"
#include "plugin_loader.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

class CodegenVision : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = fs::temp_directory_path() / ("crucible_cgv_cache_" + std::to_string(::getpid()));
    ::setenv("CRUCIBLE_CACHE_DIR", cache_.c_str(), 1);
    eager_ = load_plugin(find_plugin("eager", plugin_search_path({}))).release();
    codegen_ = load_plugin(find_plugin("codegen", plugin_search_path({}))).release();
  }
  static void TearDownTestSuite() { fs::remove_all(cache_); }

  // Every output of `g` on both backends, same seeded inputs (or `inputs`): floats within 1e-5
  // relative + absolute (bf16: 1e-2), NaN where eager has NaN.
  static void ExpectSameAsEager(const Graph& g, std::vector<Tensor> inputs = {}) {
    if (inputs.empty()) inputs = make_inputs(g, 11);
    auto ref = eager_->backend().compile(g, {})->run(inputs);
    auto got = codegen_->backend().compile(g, {})->run(inputs);
    ASSERT_EQ(ref.size(), got.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      SCOPED_TRACE(fmt::format("output {} %{}", i, g.value(g.outputs()[i]).name));
      ASSERT_EQ(shape_str(got[i].shape()), shape_str(ref[i].shape()));
      ASSERT_EQ(got[i].dtype(), ref[i].dtype());
      AccuracyOptions o;
      o.tol = ref[i].dtype() == DType::kBF16 ? 1e-2 : 1e-5;
      const auto a = compare_output(got[i], ref[i], Tensor(), o);
      EXPECT_EQ(a.mismatches, 0) << "first mismatch at " << a.first_mismatch << ", max abs err "
                                 << a.max_abs_err;
    }
  }

  // The loop program after fusion (ir_post_fusion.txt).
  static std::string fused_ir(const Graph& g) {
    const fs::path dir =
        fs::temp_directory_path() / ("crucible_cgv_dbg_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    plugin::Options opts;
    opts.config["debug_dir"] = dir.string();
    codegen_->backend().compile(g, opts);
    std::ifstream in(dir / "ir_post_fusion.txt");
    std::stringstream s;
    s << in.rdbuf();
    fs::remove_all(dir);
    return s.str();
  }

  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  static inline fs::path cache_;
  static inline LoadedBackend* eager_ = nullptr;
  static inline LoadedBackend* codegen_ = nullptr;
};

TEST_F(CodegenVision, ConvBatchNormReluIsAnExternAndOneFusedKernel) {
  const Graph g = parse_graph(R"(
graph cbr(%x: f32[2,8,11,13]) {
  param %w: f32[16,8,3,3] = randn(seed=1, std=0.2)
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
  EXPECT_EQ(count(ir, "extern::conv2d"), 3) << ir;
  EXPECT_EQ(count(ir, "extern::max_pool2d"), 1) << ir;
  EXPECT_EQ(count(ir, "extern::adaptive_avg_pool2d"), 1) << ir;
}

}  // namespace
}  // namespace crucible
