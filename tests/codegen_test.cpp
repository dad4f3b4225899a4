// The codegen backend against eager through the real plugin loader and the system compiler: every
// fused pattern on awkward shapes and dtypes, the kernels fusion forms, the debug directory,
// profiling, and the planted bugs of fault injection.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "accuracy.h"
#include "backend_pair.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/codegen/toolchain.h"
#include "crucible/core/block_cache.h"
#include "crucible/core/rng.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_loader.h"
#include "test_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

class Codegen : public testing::BackendPair {
 protected:
  static std::string code_of(const Graph& g, plugin::Options opts = {}) {
    return post_fusion_ir(g, std::move(opts));
  }
};

TEST_F(Codegen, TutorialGraphsMatchEager) {
  for (const auto& entry :
       fs::directory_iterator(fs::path(CRUCIBLE_SOURCE_DIR) / "suites" / "tutorial")) {
    if (entry.path().extension() != ".graph") continue;
    SCOPED_TRACE(entry.path().filename().string());
    ExpectSameAsEager(load_graph_file(entry.path()));
  }
}

// The fused patterns bench/ times (and `crucible run --graph` runs on every backend) parse and
// match eager.
TEST_F(Codegen, BenchPatternsMatchEager) {
  int patterns = 0;
  for (const auto& entry :
       fs::directory_iterator(fs::path(CRUCIBLE_SOURCE_DIR) / "bench" / "patterns")) {
    if (entry.path().extension() != ".graph") continue;
    SCOPED_TRACE(entry.path().filename().string());
    ExpectSameAsEager(load_graph_file(entry.path()));
    ++patterns;
  }
  EXPECT_EQ(patterns, 6);
}

// Many independent patterns in one graph, so one compile covers them all.
TEST_F(Codegen, PointwiseOpsOnAwkwardShapesAndDtypes) {
  Graph g = parse_graph(R"(
graph patterns(%a: f32[37,13], %b: f32[13], %c: f32[37,1], %u: u8[3,17], %v: u8[17], %i: i64[5,7], %j: i32[7],
               %m: bool[37,13], %h: bf16[9,33], %z: f32[0,5], %one: f32[1,1], %big: f32[70001]) {
  %p1 = add(%a, %b)
  %p2 = mul(%p1, %c)
  %p3 = sub(%p2, %a)
  %p4 = div(%p3, %c)
  %e1 = exp(%p4)
  %t1 = tanh(%a)
  %s1 = sigmoid(%b)
  %g1 = gelu(%a)
  %g2 = gelu(%a, approximate="tanh")
  %r1 = relu(%p4)
  %mx = maximum(%a, %p4)
  %mn = minimum(%a, %c)
  %cl = clamp(%a, min=-0.5, max=0.5)
  %pw = pow(%t1, %c)
  %sq = sqrt(%e1)
  %rs = rsqrt(%e1)
  %lg = log(%e1)
  %rc = reciprocal(%c)
  %er = erf(%a)
  %sn = sin(%a)
  %cs = cos(%b)
  %ab = abs(%a)
  %lt = lt(%a, %b)
  %wh = where(%m, %a, %p2)
  %wl = where(%lt, %a, %b)
  %un = neg(%u)
  %ux = maximum(%v, %un)
  %ua = add(%u, %v)
  %um = mul(%u, %v)
  %in = add(%i, %j)
  %ic = cast(%in, dtype=f32)
  %fi = cast(%a, dtype=i32)
  %ie = eq(%i, %j)
  %hb = add(%h, %h)
  %hs = exp(%hb)
  %hc = cast(%hs, dtype=f32)
  %zz = add(%z, %z)
  %o1 = mul(%one, %one)
  %bg = mul(%big, %big)
  %bh = add(%bg, %big)
  return %e1, %t1, %s1, %g1, %g2, %r1, %mx, %mn, %cl, %pw, %sq, %rs, %lg, %rc, %er, %sn, %cs, %ab, %lt, %wh, %wl, %ux, %ua, %um, %ic, %fi, %ie, %hb, %hc, %zz, %o1, %bh
}
)");
  ExpectSameAsEager(g);
}

TEST_F(Codegen, NonContiguousAndBroadcastInputs) {
  Graph g = parse_graph(R"(
graph views(%x: f32[16,24], %w: f32[24,16], %r: f32[1,24]) {
  %wt = transpose(%w, dim0=0, dim1=1)
  %s = add(%x, %wt)
  %e = expand(%r, shape=[16,24])
  %t = mul(%s, %e)
  %sl = slice(%t, dim=1, start=1, end=23, step=2)
  %y = neg(%sl)
  %rs = reshape(%x, shape=[24,16])
  %q = add(%rs, %w)
  return %y, %q
}
)");
  std::vector<Tensor> in = make_inputs(g, 3);
  // Inputs that are themselves views: a transposed tensor and a broadcast row.
  Tensor xt = Tensor::empty(DType::kF32, {24, 16});
  fill_randn(xt, 5, 0, 1);
  in[0] = xt.transpose(0, 1);
  ExpectSameAsEager(g, in);
}

TEST_F(Codegen, ReductionsAndNormalizationsMatchEager) {
  Graph g = parse_graph(R"(
graph rows(%x: f32[64,1000], %mask: f32[1000], %res: f32[64,1000], %w: f32[1000], %b: f32[1000], %h: bf16[32,77]) {
  %sc = mul(%x, %x)
  %lo = add(%sc, %mask)
  %sm = softmax(%lo, dim=-1)
  %ls = log_softmax(%x, dim=1)
  %ad = add(%x, %res)
  %ln = layer_norm(%ad, %w, %b, normalized_shape=[1000], eps=1e-05)
  %su = sum(%x, dims=[1])
  %mx = amax(%x, dims=[-1], keepdim=true)
  %mi = amin(%x, dims=[1])
  %me = mean(%x, dims=[1], keepdim=true)
  %hs = softmax(%h, dim=1)
  return %sm, %ls, %ln, %su, %mx, %mi, %me, %hs
}
)");
  ExpectSameAsEager(g);
  EXPECT_EQ(count(code_of(g), "extern::"), 0);
}

// Rows of a permuted view: two outer dims, whose offsets (and the next row's, for the prefetch)
// are computed from the row counter, with widths under and over the multi-accumulator threshold.
TEST_F(Codegen, RowKernelsOverAPermutedViewMatchEager) {
  ExpectSameAsEager(parse_graph(R"(graph pv(%x: f32[6,5,40], %w: f32[7,3,300]) {
  %p = permute(%x, dims=[1,0,2])
  %y = softmax(%p, dim=-1)
  %q = mul(%p, %p)
  %z = layer_norm(%q, normalized_shape=[40], eps=1e-05)
  %t = transpose(%w, dim0=0, dim1=1)
  %u = layer_norm(%t, normalized_shape=[300], eps=1e-05)
  %s = sum(%t, dims=[2])
  return %y, %z, %u, %s
}
)"));
}

TEST_F(Codegen, SoftmaxAndLayerNormWithNeighboursAreOneKernelEach) {
  const Graph softmax_graph = parse_graph(
      "graph s(%x: f32[256,1024], %mask: f32[1024]) {\n  %a = mul(%x, %x)\n  %b = add(%a, %mask)\n"
      "  %y = softmax(%b, dim=-1)\n  return %y\n}\n");
  ExpectSameAsEager(softmax_graph);  // the stashed-row path
  const std::string sm = code_of(softmax_graph);
  EXPECT_EQ(count(sm, " over ["), 1) << sm;
  EXPECT_TRUE(std::regex_search(
      sm, std::regex("cpp_fused_add_amax_div_exp_mul_sub_sum_0 over \\[256\\] x reduce")))
      << sm;
  const std::string ln = code_of(parse_graph(
      "graph l(%x: f32[256,1024], %r: f32[256,1024], %w: f32[1024], %b: f32[1024]) {\n  %a = "
      "add(%x, %r)\n"
      "  %y = layer_norm(%a, %w, %b, normalized_shape=[1024], eps=1e-05)\n  return %y\n}\n"));
  EXPECT_EQ(count(ln, " over ["), 1) << ln;
  EXPECT_EQ(count(ln, "extern::"), 0) << ln;
}

// GPT-2's causal mask: a [S,S] bool broadcast over [B,H,S,S] scores ahead of a softmax. Fused as a
// widened pointwise value it must not become a per-row value of the softmax's row kernel.
TEST_F(Codegen, CausalMaskAheadOfSoftmaxMatchesEager) {
  ExpectSameAsEager(parse_graph(R"(graph causal(%s: f32[2,3,7,7]) {
  %p = arange(end=7.0, dtype=i64)
  %r = unsqueeze(%p, dim=1)
  %c = unsqueeze(%p, dim=0)
  %m = ge(%r, %c)
  %low = full(shape=[], value=-3.0e38)
  %w = where(%m, %s, %low)
  %y = softmax(%w, dim=-1)
  return %y
}
)"));
}

// A constant tensor read by an extern call (MobileBERT's zero padding in a cat) is a real tensor,
// not a scalar inlined into kernels.
TEST_F(Codegen, ConstantTensorFeedingAnExternCall) {
  ExpectSameAsEager(parse_graph(R"(graph pad(%e: f32[2,5,3]) {
  %z = full(shape=[2, 1, 3], value=0.0)
  %s = slice(%e, dim=1, start=1, end=5)
  %n = cat(%s, %z, dim=1)
  %two = full(shape=[], value=2.0)
  %y = mul(%n, %two)
  return %y
}
)"));
}

TEST_F(Codegen, NanPropagatesThroughFusedMaxAndSoftmax) {
  Graph g = parse_graph(
      "graph n(%x: f32[20,9], %y: f32[20,9]) {\n  %m = maximum(%x, %y)\n  %a = amax(%x, dims=[1])\n"
      "  %s = softmax(%x, dim=1)\n  return %m, %a, %s\n}\n");
  auto in = make_inputs(g, 1);
  in[0].data<float>()[4] = NAN;
  in[1].data<float>()[30] = NAN;
  ExpectSameAsEager(g, in);
}

// Rows that exercise every special path of the vectorized exp inside a fused softmax, at widths
// that leave a SIMD tail (37) or are shorter than one vector (5): +inf (the row turns NaN),
// masked -inf logits (exact zeros), an all -inf row (NaN), huge finite spreads (exp underflows
// to 0 for all but the maximum), and denormal-range differences.
TEST_F(Codegen, SoftmaxRowsWithInfNanAndExtremesMatchEager) {
  Graph g = parse_graph(
      "graph s(%x: f32[8,37], %m: f32[37], %n: f32[6,5]) {\n  %s = full(shape=[], value=0.125)\n"
      "  %a = mul(%x, %s)\n  %b = add(%a, %m)\n  %y = softmax(%b, dim=-1)\n"
      "  %z = softmax(%n, dim=1)\n  return %y, %z\n}\n");
  auto in = make_inputs(g, 5);
  const float inf = std::numeric_limits<float>::infinity();
  float* x = in[0].data<float>();
  x[0 * 37 + 3] = inf;                                           // row 0: +inf
  for (int j = 0; j < 37; j += 3) x[1 * 37 + j] = -inf;          // row 1: masked logits
  for (int j = 0; j < 37; ++j) x[2 * 37 + j] = -inf;             // row 2: all masked
  x[3 * 37 + 36] = NAN;                                          // row 3: NaN in the tail
  for (int j = 0; j < 37; ++j) x[4 * 37 + j] = j * 1e5f;         // row 4: huge spread
  for (int j = 0; j < 37; ++j) x[5 * 37 + j] = -700.0f + j * 8;  // row 5: exp near FLT_MIN
  in[1].data<float>()[10] = -inf;                                // a masked column everywhere
  float* n = in[2].data<float>();
  n[0] = -inf;
  n[5 + 4] = inf;
  for (int j = 0; j < 5; ++j) n[10 + j] = 88.0f + j;  // large but equal-ish logits
  n[15 + 2] = NAN;
  ExpectSameAsEager(g, in);
  auto got = codegen_->backend().compile(g, {})->run(in);
  const float* y = got[0].data<float>();
  EXPECT_EQ(y[1 * 37 + 0], 0.0f);  // exp(-inf) is an exact zero, not a tiny value
  EXPECT_TRUE(std::isnan(y[0 * 37 + 5]) && std::isnan(y[2 * 37]) && std::isnan(y[3 * 37]));
}

// exp's far ends, where eager and codegen share fast_math.h and so cannot catch each other: each
// backend is held to the true values. log(softmax(x)) keeps logits down to -103 (denormal
// probabilities; it gave -inf below -87.6), sigmoid and silu stay exact zeros past exp's
// overflow, as PyTorch's 1/(1 + exp(-x)) does, and exp itself overflows only past 88.7228.
TEST_F(Codegen, ExpAtTheEdgesOfFloatMatchesTheTrueValuesOnBothBackends) {
  Graph g = parse_graph(
      "graph e(%x: f32[2,9], %y: f32[2,9]) {\n  %s = softmax(%x, dim=1)\n  %l = log(%s)\n"
      "  %e = exp(%y)\n  %t = tanh(%y)\n  return %l, %e, %t\n}\n");
  auto in = make_inputs(g, 3);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0, -20, -87.79f, -95, -103, -105, -200, -inf, -50};
  const std::vector<float> args = {88.5f, 88.72f, 88.73f, -87.5f, -100, -104, 1e-10f, -1e-20f, 0};
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 9; ++j) {
      in[0].data<float>()[r * 9 + j] = logits[j];
      in[1].data<float>()[r * 9 + j] = args[j];
    }
  }
  for (auto* b : {eager_, codegen_}) {
    SCOPED_TRACE(b->backend().info().name);
    auto out = b->backend().compile(g, {})->run(in);
    for (int r = 0; r < 2; ++r) {
      const float* l = out[0].data<float>() + r * 9;
      EXPECT_NEAR(l[2], -87.79, 1e-4);
      EXPECT_NEAR(l[3], -95.0, 1e-2);  // a denormal's few significant bits
      EXPECT_NEAR(l[4], -103.0, 0.5);
      EXPECT_EQ(l[5], -inf);  // exp(-105) rounds to 0 in float, as in libm
      EXPECT_EQ(l[7], -inf);
      const float* e = out[1].data<float>() + r * 9;
      for (int j = 0; j < 9; ++j) {
        const double want = std::exp(static_cast<double>(args[j]));
        if (std::isinf(static_cast<float>(want))) {
          EXPECT_EQ(e[j], inf) << args[j];
        } else {
          EXPECT_NEAR(e[j], want, std::max(want * 2.4e-7, 1.5e-45)) << args[j];
        }
      }
      const float* t = out[2].data<float>() + r * 9;
      EXPECT_EQ(t[6], 1e-10f);  // tanh keeps tiny arguments
      EXPECT_EQ(t[7], -1e-20f);
    }
  }
  ExpectSameAsEager(g, in);
}

// clamp's NaN bounds (PyTorch 1.13's rule, clamp_bounds.h) fused with its neighbours, f32, f64
// and bf16: a lone NaN bound is no bound, either NaN of two bounds makes the result NaN.
TEST_F(Codegen, ClampWithNanBoundsMatchesEager) {
  std::string text = "graph c(%x: f32[4,33], %d: f64[33], %h: bf16[2,9]) {\n";
  std::string outs;
  int i = 0;
  for (const char* bounds : {"min=nan", "max=nan", "min=nan, max=1.0", "min=-1.0, max=nan",
                             "min=nan, max=nan", "min=0.5", "min=2.0, max=-1.0"}) {
    for (const char* in : {"x", "d", "h"}) {
      text +=
          fmt::format("  %a{0} = mul(%{1}, %{1})\n  %c{0} = clamp(%a{0}, {2})\n", i, in, bounds);
      outs += fmt::format("{}%c{}", outs.empty() ? "" : ", ", i++);
    }
  }
  const Graph g = parse_graph(text + "  return " + outs + "\n}\n");
  auto in = make_inputs(g, 2);
  in[0].data<float>()[5] = NAN;
  ExpectSameAsEager(g, in);
  plugin::Options off;
  off.config["fusion"] = "off";
  ExpectSameAsEager(g, in, off);
  auto got = codegen_->backend().compile(g, {})->run(in);
  EXPECT_EQ(got[0].data<float>()[0], in[0].data<float>()[0] * in[0].data<float>()[0]);
  EXPECT_TRUE(std::isnan(got[6].data<float>()[0]));
}

// Zero-size dims in inputs, parameters and a packed linear with K = 0 (its output is the bias, the
// empty sum): codegen ran it on no rows and left the output unwritten.
TEST_F(Codegen, ZeroSizeInputsAndEmptyLinearMatchEager) {
  const Graph g = parse_graph(
      "graph z(%x: f32[4,0], %i: i32[2,0] = randint(low=0, high=9), %u: u8[3,0,2]) {\n"
      "  param %w: f32[3,0] = randn(seed=1)\n  param %b: f32[3] = randn(seed=2)\n"
      "  param %w2: f32[5,0] = randn(seed=3)\n"
      "  %l = linear(%x, %w, %b)\n  %r = relu(%l)\n  %l2 = linear(%x, %w2)\n"
      "  %n = neg(%i)\n  %s = sum(%u, dims=[1])\n  return %r, %l2, %n, %s\n}\n");
  ExpectSameAsEager(g);
  auto got = codegen_->backend().compile(g, {})->run(make_inputs(g, 1));
  const Tensor b = materialize_param(g, g.params()[1]);
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(got[0].data<float>()[r * 3 + j], std::max(b.data<float>()[j], 0.0f));
    }
  }
}

// softmax's row max skips its NaN test (the sum of exp carries a NaN to every result of the row)
// and its exp drops the upper clamp (the argument is <= 0); log_softmax likewise. A hand-written
// exp(x - amax(x)) that is itself a result keeps both: there no sum stands between the max and
// the result, and eager's NaN max must turn the whole row NaN.
TEST_F(Codegen, SoftmaxMaxLeavesNanToTheSumOnlyWhenEveryResultReadsIt) {
  const Graph g = parse_graph(
      "graph s(%x: f32[6,37]) {\n  %y = softmax(%x, dim=-1)\n  %l = log_softmax(%x, dim=1)\n"
      "  return %y, %l\n}\n");
  auto in = make_inputs(g, 3);
  float* x = in[0].data<float>();
  x[0 * 37 + 36] = NAN;                                    // NaN in the SIMD tail
  x[1 * 37 + 2] = NAN;                                     // NaN in the vector body
  x[2 * 37 + 5] = std::numeric_limits<float>::infinity();  // +inf: inf - inf = NaN
  for (int j = 0; j < 37; ++j) x[3 * 37 + j] = -1e30f;     // all equal and very negative
  ExpectSameAsEager(g, in);
  const std::string code = debug_artifact(g, "output_code.cpp");
  EXPECT_EQ(count(code, "_nan"), 0) << code;
  EXPECT_GE(count(code, "crucible_fast::exp_nonpos_lim_f32("), 2) << code;
  EXPECT_EQ(count(code, "crucible_fast::exp_lim_f32("), 0) << code;

  const Graph hand = parse_graph(
      "graph h(%x: f32[6,37]) {\n  %m = amax(%x, dims=[1], keepdim=true)\n  %s = sub(%x, %m)\n"
      "  %e = exp(%s)\n  %t = sum(%e, dims=[1], keepdim=true)\n  %y = div(%e, %t)\n"
      "  return %e, %y\n}\n");
  ExpectSameAsEager(hand, in);
  const std::string hand_code = debug_artifact(hand, "output_code.cpp");
  EXPECT_NE(hand_code.find("_nan"), std::string::npos) << hand_code;
  auto got = codegen_->backend().compile(hand, {})->run(in);
  EXPECT_TRUE(std::isnan(got[0].data<float>()[1 * 37 + 30]));  // the max's NaN, not the sum's
}

// A kernel forks where eager's kernels would (parallel_grain.h): by the element operations of its
// nodes, not its element count. The tutorial's [8390,8] maximum + cat (67 Ki elements, one add-like
// op) stays serial; the same shape through sin and exp forks, as does an add over 128 Ki elements;
// a neg over the broadcast [1,8] row adds nothing to the work.
TEST_F(Codegen, KernelsForkAtEagersGrain) {
  const auto forks = [&](const std::string& text) {
    const std::string code = debug_artifact(parse_graph(text), "output_code.cpp");
    // Every parallel region's condition is decided when the kernel is generated.
    EXPECT_EQ(count(code, "omp parallel"), count(code, "if (true)") + count(code, "if (false)"))
        << code;
    return count(code, "if (true)") > 0;
  };
  EXPECT_FALSE(
      forks("graph t(%a: f32[1,8], %b: f32[8390,8]) {\n  %n = neg(%a)\n  %m = maximum(%b, %n)\n"
            "  %y = cat(%m, dim=0)\n  return %y\n}\n"));
  EXPECT_TRUE(
      forks("graph t(%b: f32[8390,8]) {\n  %s = sin(%b)\n  %e = exp(%s)\n  return %e\n}\n"));
  EXPECT_TRUE(
      forks("graph t(%a: f32[512,256], %b: f32[512,256]) {\n  %y = add(%a, %b)\n"
            "  return %y\n}\n"));
  EXPECT_FALSE(
      forks("graph t(%a: f32[256,256], %b: f32[256,256]) {\n  %y = add(%a, %b)\n"
            "  return %y\n}\n"));
}

// A view no step reads (here each reshape ahead of a permute: the permute is laid over the matmul's
// buffer directly) must not hold that buffer to the end of the run: six layers of such views kept
// six dead 2 MiB buffers alive (MobileBERT: 96 of 8 MiB). Codegen's peak of tensor storage stays
// within eager's, which frees every result after its last reader.
TEST_F(Codegen, ResultsNoStepReadsDoNotOutliveTheirStep) {
  std::string text = "graph m(%h0: f32[8,256,256], %w: f32[256,256]) {\n";
  for (int l = 0; l < 6; ++l) {
    text += fmt::format(
        "  %m{0} = matmul(%h{0}, %w)\n  %r{0} = reshape(%m{0}, shape=[8,256,4,64])\n"
        "  %p{0} = permute(%r{0}, dims=[0, 2, 1, 3])\n  %q{0} = mul(%p{0}, %p{0})\n"
        "  %h{1} = reshape(%q{0}, shape=[8,256,256])\n",
        l, l + 1);
  }
  text += "  return %h6\n}\n";
  const Graph g = parse_graph(text);
  const auto in = make_inputs(g, 2);
  ExpectSameAsEager(g, in);
  auto peak_of = [&](LoadedBackend& backend) {
    auto exe = backend.backend().compile(g, {});
    const size_t before = storage_bytes_in_use();
    storage_peak_reset();
    exe->run(in);
    return storage_peak_bytes() - before;
  };
  const size_t eager = peak_of(*eager_), codegen = peak_of(*codegen_);
  EXPECT_LE(codegen, eager) << "codegen " << (codegen >> 10) << " KiB, eager " << (eager >> 10)
                            << " KiB";
}

// Weights materialized only to be packed are freed, and their blocks are handed back to the system
// rather than kept in the cache of freed blocks, where no activation of their size would reuse
// them: after compiling a packed linear nothing stays cached and no tensor storage is held for
// the 16 MiB weight.
TEST_F(Codegen, WeightsOnlyPackedLeaveNoStorageBehind) {
  const Graph g = parse_graph(
      "graph l(%x: f32[64,2048]) {\n  param %w: f32[2048,2048] = randn(seed=1, std=0.02)\n"
      "  %y = linear(%x, %w)\n  return %y\n}\n");
  const size_t before = storage_bytes_in_use();
  auto exe = codegen_->backend().compile(g, {});
  EXPECT_EQ(block_cache_bytes(), 0u);
  EXPECT_LT(storage_bytes_in_use(), before + (1u << 20));
  ExpectSameAsEager(g);
}

// gelu(x + bias) with the rational erf: specials and the range where erf saturates to +-1.
TEST_F(Codegen, GeluOfExtremeInputsMatchesEager) {
  Graph g = parse_graph(
      "graph g(%x: f32[3,45], %b: f32[45]) {\n  %a = add(%x, %b)\n  %y = gelu(%a)\n"
      "  %e = erf(%a)\n  return %y, %e\n}\n");
  auto in = make_inputs(g, 9);
  const float inf = std::numeric_limits<float>::infinity();
  float* x = in[0].data<float>();
  const float specials[] = {inf, -inf, NAN, 1e30f, -1e30f, 5.5f, -5.5f, 3.9f, -3.9f, 1e-30f, 0};
  for (size_t i = 0; i < std::size(specials); ++i) x[45 + 2 * i] = specials[i];
  for (int j = 0; j < 45; ++j) x[90 + j] = -8.0f + j * 0.37f;  // through the saturation point
  ExpectSameAsEager(g, in);
}

TEST_F(Codegen, FusionFormsTheExpectedKernels) {
  Graph tut =
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/add_add_mul_add.graph");
  std::string ir = code_of(tut);
  EXPECT_EQ(count(ir, " over ["), 1) << ir;
  EXPECT_NE(ir.find("cpp_fused_add_mul_0 over [16384,512]"), std::string::npos) << ir;
  std::string sc =
      code_of(load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/sin_cos.graph"));
  EXPECT_NE(sc.find("cpp_fused_add_cos_sin_0"), std::string::npos) << sc;  // horizontal + vertical
  std::string neg = code_of(
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/neg_maximum_cat_u8.graph"));
  EXPECT_NE(neg.find("cpp_fused_cat_maximum_neg_0"), std::string::npos) << neg;
  // fusion=off gives one kernel per op.
  plugin::Options off;
  off.config["fusion"] = "off";
  EXPECT_EQ(count(code_of(tut, off), " over ["), 4);
}

TEST_F(Codegen, DebugDirectoryHasEveryArtifactWithNodeComments) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_cg_art_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  plugin::Options opts;
  opts.config["debug_dir"] = dir.string();
  Graph g =
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/neg_maximum_cat_u8.graph");
  auto exe = codegen_->backend().compile(g, opts);
  for (const char* f : {"graph_readable.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt",
                        "output_code.cpp", "schedule.txt", "compile_times.txt"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  EXPECT_EQ(exe->artifacts().size(), 6u);
  // The schedule names each step with the buffers it reads and writes.
  std::ifstream sched_in(dir / "schedule.txt");
  std::stringstream sched;
  sched << sched_in.rdbuf();
  EXPECT_NE(sched.str().find("step   0 cpp_fused_"), std::string::npos) << sched.str();
  EXPECT_NE(sched.str().find("(%x1, %x2"), std::string::npos) << sched.str();
  std::ifstream in(dir / "output_code.cpp");
  std::stringstream code;
  code << in.rdbuf();
  EXPECT_NE(code.str().find("// %a = neg(%x1)"), std::string::npos) << code.str();
  EXPECT_NE(code.str().find("// %b = maximum(%x2, %a)"), std::string::npos);
  EXPECT_NE(code.str().find("#pragma omp"), std::string::npos);
  // No timing calls in generated code, profiling or not: kernels are timed by the runtime around
  // calls.
  EXPECT_EQ(code.str().find("chrono"), std::string::npos);
  fs::remove_all(dir);
}

TEST_F(Codegen, ProfileNamesKernelsAndExterns) {
  Graph g = load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) /
                            "suites/tutorial/linear_layernorm_relu.graph");
  plugin::Options opts;
  opts.profile = true;
  auto exe = codegen_->backend().compile(g, opts);
  auto in = make_inputs(g, 0);
  exe->run(in);
  exe->run(in);
  auto stats = exe->profile();
  bool saw_kernel = false, saw_extern = false;
  for (const auto& s : stats) {
    // Externs of one kind share a name (like eager::add), so their calls add up per run.
    EXPECT_EQ(s.calls % 2, 0) << s.name;
    if (s.name.rfind("cpp_fused_", 0) == 0) {
      EXPECT_EQ(s.calls, 2) << s.name;
    }
    saw_kernel |= s.name.rfind("cpp_fused_", 0) == 0;
    saw_extern |= s.name.rfind("extern::packed_linear[", 0) == 0;  // with its MxKxN
  }
  EXPECT_TRUE(saw_kernel);
  EXPECT_TRUE(saw_extern);
  EXPECT_TRUE(codegen_->backend().compile(g, {})->profile().empty());
}

TEST_F(Codegen, LinearWithParameterWeightsIsPackedWithItsActivationFused) {
  Graph g = parse_graph(R"(
graph mlp(%x: f32[33,64], %z: f32[2,5,64]) {
  param %w1: f32[48,64] = randn(seed=1, std=0.1)
  param %b1: f32[48] = randn(seed=2, std=0.1)
  param %w2: f32[48,16] = randn(seed=3, std=0.1)
  %h = linear(%x, %w1, %b1)
  %a = relu(%h)
  %o = matmul(%a, %w2)
  %g = gelu(%o)
  %z1 = linear(%z, %w1)
  %t = tanh(%z1)
  %u = add(%t, %t)
  return %g, %u
}
)");
  ExpectSameAsEager(g);
  const std::string ir = code_of(g);
  EXPECT_NE(ir.find("extern::packed_linear_relu"), std::string::npos) << ir;
  EXPECT_NE(ir.find("extern::packed_linear_gelu"), std::string::npos) << ir;
  EXPECT_NE(ir.find("extern::packed_linear_tanh"), std::string::npos) << ir;
  EXPECT_EQ(count(ir, "extern::linear"), 0) << ir;
}

// Random pointwise chains with broadcasting over random shapes (odd sizes, size-1 dims), several
// dtypes: the generated code must agree with eager on every one. Seeded, so a failure reproduces.
TEST_F(Codegen, RandomizedPointwiseChainsMatchEager) {
  std::mt19937 rng(20261122);
  const char* kBinary[] = {"add", "sub", "mul", "maximum", "minimum"};
  const char* kUnary[] = {"neg", "abs", "relu", "exp", "tanh", "sigmoid", "erf", "gelu"};
  const DType kTypes[] = {DType::kF32, DType::kF64, DType::kBF16,
                          DType::kI32, DType::kI64, DType::kU8};
  std::string body, ins, outs;
  for (int c = 0; c < 12; ++c) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    Shape full;
    for (int d = 0; d < rank; ++d) full.push_back(1 + static_cast<int64_t>(rng() % 37));
    Shape narrow = full;  // broadcast operand: some dims squeezed to 1
    for (auto& d : narrow) {
      if (rng() % 2) d = 1;
    }
    const DType dt = kTypes[rng() % 6];
    const bool fl = is_floating(dt);
    ins += fmt::format("{}%a{}: {}, %b{}: {}", c ? ", " : "", c, TensorType{dt, full}.str(), c,
                       TensorType{dt, narrow}.str());
    std::string cur = fmt::format("%a{}", c);
    for (int k = 0; k < 4; ++k) {
      const std::string out = fmt::format("%v{}_{}", c, k);
      if (rng() % 2 || !fl) {
        body += fmt::format("  {} = {}({}, %b{})\n", out, kBinary[rng() % 5], cur, c);
      } else {
        body += fmt::format("  {} = {}({})\n", out, kUnary[rng() % 8], cur);
      }
      cur = out;
    }
    outs += (outs.empty() ? "" : ", ") + cur;
  }
  Graph g = parse_graph("graph random(" + ins + ") {\n" + body + "  return " + outs + "\n}\n");
  // Keep exp/tanh chains finite: inputs in [-2, 2].
  auto in = make_inputs(g, 11);
  for (Tensor& t : in) {
    if (is_floating(t.dtype())) fill_uniform(t, 99, -2.0, 2.0);
  }
  ExpectSameAsEager(g, in);
}

// The inner loops of a fused kernel vectorize: the compiler's own report on the generated code.
TEST_F(Codegen, GeneratedInnerLoopsVectorize) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_cg_vec_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  plugin::Options opts;
  opts.config["debug_dir"] = dir.string();
  // Row kernels (softmax with gelu; log_softmax; a sum of exps) and flat kernels (exp, tanh,
  // sigmoid, gelu, several outputs in one loop), all calling the clamped fast math.
  codegen_->backend().compile(
      parse_graph("graph v(%x: f32[256,1000], %m: f32[1000], %f: f32[300000]) {\n"
                  "  %a = add(%x, %m)\n  %y = softmax(%a, dim=-1)\n  %z = gelu(%a)\n"
                  "  %b = mul(%x, %x)\n  %l = log_softmax(%b, dim=-1)\n"
                  "  %c = sub(%x, %m)\n  %e = exp(%c)\n  %s = sum(%e, dims=[1])\n"
                  "  %t = tanh(%f)\n  %g = sigmoid(%f)\n  %h = gelu(%f, approximate=\"tanh\")\n"
                  "  %k = exp(%f)\n  return %y, %z, %l, %s, %t, %g, %h, %k\n}\n"),
      opts);
  // The toolchain's own compiler, asked for its vectorization report in its own dialect: GCC's
  // -fopt-info-vec-optimized ("file:L:C: optimized: loop vectorized") or Clang's
  // -Rpass=loop-vectorize ("file:L:C: remark: vectorized loop").
  const std::string compiler = codegen::ToolchainOptions::default_compiler();
  const bool clang = codegen::compiler_version(compiler).find("clang") != std::string::npos;
  const std::string cmd = compiler +
                          " -O3 -march=native -fopenmp -fPIC -std=c++17 -x c++ -c -o /dev/null " +
                          (clang ? "-Rpass=loop-vectorize " : "-fopt-info-vec-optimized ") +
                          (dir / "output_code.cpp").string() + " 2>&1";
  std::string report;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) report += buf;
    ::pclose(p);
  }
  std::ifstream in(dir / "output_code.cpp");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // A compiler names a vectorized loop by a line of its pragma, header or body: a loop counts as
  // vectorized when a report line falls between its pragma and the next loop's.
  std::vector<int> reported;
  std::regex where(clang ? "output_code\\.cpp:(\\d+):\\d+: remark: vectorized loop"
                         : "output_code\\.cpp:(\\d+):\\d+: optimized: loop vectorized");
  for (std::sregex_iterator it(report.begin(), report.end(), where), end; it != end; ++it) {
    reported.push_back(std::stoi((*it)[1]));
  }
  std::vector<int> loops;
  for (size_t i = 0; i < lines.size(); ++i) {
    // Element loops, and the loops over a block of lanes in multi-accumulator sums.
    if (lines[i].find("for (int64_t j = 0;") != std::string::npos ||
        lines[i].find("for (int64_t l = 0;") != std::string::npos)
      loops.push_back(static_cast<int>(i) + 1);
  }
  int vectorized = 0;
  for (size_t k = 0; k < loops.size(); ++k) {
    const int lo = loops[k] - 1, hi = k + 1 < loops.size() ? loops[k + 1] - 2 : INT32_MAX;
    if (std::any_of(reported.begin(), reported.end(), [&](int l) { return l >= lo && l <= hi; }))
      ++vectorized;
  }
  const int simd_loops = static_cast<int>(loops.size());
  EXPECT_GE(simd_loops, 7);  // softmax/log_softmax passes, the sum of exps, the flat loop
  EXPECT_EQ(vectorized, simd_loops) << report;
  fs::remove_all(dir);
}

TEST_F(Codegen, InjectedBugsMisbehaveAsPlanted) {
  Graph g =
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/neg_maximum_cat_f32.graph");
  auto in = make_inputs(g, 2);
  auto ref = eager_->backend().compile(g, {})->run(in);
  plugin::Options times2;
  times2.config["inject"] = "neg:times2";
  auto wrong = codegen_->backend().compile(g, times2)->run(in);
  EXPECT_GT(compare_output(wrong[0], ref[0], Tensor(), {}).mismatches, 0);
  plugin::Options no_cast;
  no_cast.config["inject"] = "neg:no_cast";
  Graph u8 =
      load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/neg_maximum_cat_u8.graph");
  try {
    codegen_->backend().compile(u8, no_cast);
    ADD_FAILURE() << "no_cast compiled";
  } catch (const plugin::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("cr_maximum"), std::string::npos) << e.what();
  }
  // Node-targeted: planted in %a only, or in a value that no neg produces (then nothing is).
  plugin::Options at_a;
  at_a.config["inject"] = "neg:times2@a";
  EXPECT_GT(compare_output(codegen_->backend().compile(g, at_a)->run(in)[0], ref[0], Tensor(), {})
                .mismatches,
            0);
  plugin::Options max_b;  // times2 on any op's result, here maximum's
  max_b.config["inject"] = "maximum:times2@b";
  EXPECT_GT(compare_output(codegen_->backend().compile(g, max_b)->run(in)[0], ref[0], Tensor(), {})
                .mismatches,
            0);
  plugin::Options at_b;
  at_b.config["inject"] = "neg:times2@b";
  EXPECT_EQ(compare_output(codegen_->backend().compile(g, at_b)->run(in)[0], ref[0], Tensor(), {})
                .mismatches,
            0);
  plugin::Options bad;
  bad.config["inject"] = "neg:sideways";
  EXPECT_THROW(codegen_->backend().compile(g, bad), plugin::CompileError);
  plugin::Options unknown;
  unknown.config["unroll"] = "4";
  EXPECT_THROW(codegen_->backend().compile(g, unknown), plugin::CompileError);
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"max_fusion_size", "abc"},
           {"kernels_per_unit", "0"},
           {"fusion", "maybe"},
           {"fusion", "yes"},
           {"fast_math", "yes"},  // was silently off: every option is parsed in one place now
           {"fast_math", "1"},
           {"inject", ":crash"},
           {"inject", "mul:crash@"},
           {"inject", "mul@x:crash"}}) {
    plugin::Options malformed;
    malformed.config[key] = value;
    try {
      codegen_->backend().compile(g, malformed);
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const plugin::CompileError& e) {
      EXPECT_NE(std::string(e.what()).find("-c " + key + "=" + value), std::string::npos)
          << e.what();
    }
  }
}

// The typed options: defaults, both spellings of a boolean, and every field set from its key.
TEST(CodegenConfig, ParsesEveryOptionOnceIntoTypes) {
  const codegen::CodegenConfig d = codegen::CodegenConfig::parse({});
  EXPECT_TRUE(d.fusion);
  EXPECT_FALSE(d.fast_math);
  EXPECT_EQ(d.max_fusion_size, 64u);
  EXPECT_EQ(d.kernels_per_unit, 16u);
  EXPECT_FALSE(d.inject.active());
  const codegen::CodegenConfig c = codegen::CodegenConfig::parse({{"fusion", "false"},
                                                                  {"fast_math", "true"},
                                                                  {"max_fusion_size", "7"},
                                                                  {"kernels_per_unit", "3"},
                                                                  {"debug_dir", "d"},
                                                                  {"inject", "mul:crash"}});
  EXPECT_FALSE(c.fusion);
  EXPECT_TRUE(c.fast_math);
  EXPECT_EQ(c.max_fusion_size, 7u);
  EXPECT_EQ(c.kernels_per_unit, 3u);
  EXPECT_EQ(c.debug_dir, "d");
  EXPECT_EQ(c.inject.op, "mul");
  EXPECT_EQ(c.inject.kind, "crash");
  EXPECT_TRUE(c.inject.node.empty());
  EXPECT_TRUE(c.packed_linear && c.packed_conv && c.channels_last && c.chain_kernels &&
              c.eager_nodes.empty());
  EXPECT_EQ(c.chain_layout, "auto");
  const codegen::CodegenConfig b =
      codegen::CodegenConfig::parse({{"packed_linear", "off"},
                                     {"packed_conv", "false"},
                                     {"channels_last", "off"},
                                     {"chain_layout", "nchw8c"},
                                     {"chain_kernels", "off"},
                                     {"conv_algorithm", "direct"},
                                     {"eager_nodes", "%a,b.c"},
                                     {"no_decompose", "softmax,layer_norm"}});
  EXPECT_FALSE(b.packed_linear);
  EXPECT_FALSE(b.packed_conv);
  EXPECT_FALSE(b.channels_last);
  EXPECT_EQ(b.chain_layout, "nchw8c");
  EXPECT_FALSE(b.chain_kernels);
  EXPECT_THROW(codegen::CodegenConfig::parse({{"chain_kernels", "some"}}), Error);
  EXPECT_THROW(codegen::CodegenConfig::parse({{"chain_layout", "nchw16c"}}), Error);
  EXPECT_EQ(b.conv_algorithm, "direct");
  EXPECT_EQ(c.conv_algorithm, "fastest");
  EXPECT_THROW(codegen::CodegenConfig::parse({{"conv_algorithm", "fft"}}), Error);
  EXPECT_EQ(b.eager_nodes, (std::set<std::string>{"a", "b.c"}));
  EXPECT_EQ(b.no_decompose, (std::set<std::string>{"softmax", "layer_norm"}));
  EXPECT_THROW(codegen::CodegenConfig::parse({{"eager_nodes", "a,,b"}}), Error);
  EXPECT_THROW(codegen::CodegenConfig::parse({{"packed_conv", "maybe"}}), Error);
  const codegen::Injection at =
      codegen::CodegenConfig::parse({{"inject", "add:offbyone@layer.3.add_1"}}).inject;
  EXPECT_EQ(at.kind, "offbyone");
  EXPECT_EQ(at.node, "layer.3.add_1");
  EXPECT_TRUE(at.hits("add", "layer.3.add_1"));
  EXPECT_FALSE(at.hits("add", "layer.3.add_2"));
  EXPECT_FALSE(at.hits("mul", "layer.3.add_1"));
  EXPECT_TRUE(codegen::CodegenConfig::parse({{"fusion", "off"}, {"fast_math", "on"}}).fast_math);
  EXPECT_THROW(codegen::CodegenConfig::parse({{"Fusion", "on"}}), Error);
}

// The bisection switches: packing off, and nodes sent to eager's kernels, change what runs (the
// post-fusion IR says) but never the results.
TEST_F(Codegen, BisectionSwitchesChangeTheProgramNotTheResults) {
  const Graph g = parse_graph(
      "graph lin(%x: f32[16,64]) {\n"
      "  param %w: f32[32,64] = randn(seed=4, std=0.1)\n  param %b: f32[32] = randn(seed=5)\n"
      "  %h = linear(%x, %w, %b)\n  %r = relu(%h)\n  %e = exp(%r)\n  %y = neg(%e)\n"
      "  return %y\n}\n");
  EXPECT_NE(code_of(g).find("extern::packed_linear_relu"), std::string::npos) << code_of(g);
  plugin::Options unpacked;
  unpacked.config["packed_linear"] = "off";
  EXPECT_EQ(code_of(g, unpacked).find("packed_linear"), std::string::npos) << code_of(g, unpacked);
  ExpectSameAsEager(g, {}, unpacked);
  plugin::Options eager_exp;
  eager_exp.config["eager_nodes"] = "e";
  const std::string ir = code_of(g, eager_exp);
  EXPECT_NE(ir.find("extern::exp"), std::string::npos) << ir;
  ExpectSameAsEager(g, {}, eager_exp);
  // A decomposed op kept whole, by op or by its node's name: one eager kernel.
  const Graph sm = parse_graph(
      "graph sm(%x: f32[4,16]) {\n  %h = mul(%x, %x)\n  %s = softmax(%h, dim=-1)\n"
      "  return %s\n}\n");
  EXPECT_EQ(code_of(sm).find("extern::softmax"), std::string::npos) << code_of(sm);
  for (const auto& [key, value] : {std::pair{"no_decompose", "softmax"}, {"eager_nodes", "s"}}) {
    plugin::Options whole;
    whole.config[key] = value;
    EXPECT_NE(code_of(sm, whole).find("extern::softmax"), std::string::npos) << code_of(sm, whole);
    ExpectSameAsEager(sm, {}, whole);
  }
}

TEST_F(Codegen, SecondCompileIsACacheHit) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_cg_hit_" + std::to_string(::getpid()));
  plugin::Options opts;
  opts.config["debug_dir"] = dir.string();
  Graph g = load_graph_file(fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial/sin_cos.graph");
  codegen_->backend().compile(g, opts);
  codegen_->backend().compile(g, opts);
  std::ifstream in(dir / "compile_times.txt");
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_NE(s.str().find("cache hit"), std::string::npos) << s.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible
