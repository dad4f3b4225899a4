// PackedConv2d against the eager conv2d -> batch_norm -> add -> relu/clamp chain on randomized and
// model-like shapes, in place, across input shapes and threads, and its error cases.
#include "crucible/ops/packed_conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "ops/timed_choice.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::op_helpers::ExpectErrorWith;
using testing::op_helpers::Op;

// oneDNN 2.6 has an f32 Winograd kernel only for AVX-512 (its avx512_core: F, BW, VL and DQ); on
// another CPU kWinograd must run ours (winograd_f4x3.h). The CPU's flags are the oracle here, not
// oneDNN, so a oneDNN Winograd plan that fails to build on an AVX-512 machine still fails.
bool CpuHasOneDnnWinograd() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

struct Case {
  int64_t n, c, h, w, o, k;
  int64_t stride = 1, pad = 0, dilation = 1, groups = 1;
  bool bias = false, bn = true, residual = false;
  ConvActivation act = ConvActivation::kRelu;

  Attrs attrs() const {
    return {{"stride", std::vector<int64_t>{stride}},
            {"padding", std::vector<int64_t>{pad}},
            {"dilation", std::vector<int64_t>{dilation}},
            {"groups", groups}};
  }
  Shape input() const { return {n, c, h, w}; }
  std::string str() const {
    static const char* kAct[] = {"none", "relu",        "relu6",    "sigmoid",
                                 "silu", "hardsigmoid", "hardswish"};
    return "n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
           std::to_string(w) + " o" + std::to_string(o) + " k" + std::to_string(k) + " s" +
           std::to_string(stride) + " p" + std::to_string(pad) + " d" + std::to_string(dilation) +
           " g" + std::to_string(groups) + (bias ? " bias" : "") + (bn ? " bn" : "") +
           (residual ? " residual" : "") + " " + kAct[static_cast<int>(act)];
  }
};

Tensor Uniform(Shape shape, uint64_t seed, double low = -1.0, double high = 1.0) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_uniform(t, seed, low, high);
  return t;
}

Tensor Abs64(const Tensor& t) {
  std::vector<double> v = t.to_doubles();
  for (double& e : v) e = std::abs(e);
  return Tensor::from_doubles(DType::kF64, t.shape(), v);
}

constexpr double kEps = 1e-3;

// One problem's operands, drawn once. Weights are scaled by 1/sqrt(fan_in) so outputs are O(1)
// and relu/relu6 see both signs and both clamp bounds.
struct Operands {
  Tensor x, w, b, gamma, beta, mean, var, residual;
  explicit Operands(const Case& k, uint64_t seed) {
    const double fan_in = static_cast<double>(k.c / k.groups * k.k * k.k);
    const double ws = 3.0 / std::sqrt(fan_in);
    x = Uniform(k.input(), seed);
    w = Uniform({k.o, k.c / k.groups, k.k, k.k}, seed + 1, -ws, ws);
    if (k.bias) b = Uniform({k.o}, seed + 2);
    gamma = Uniform({k.o}, seed + 3, 0.5, 2.0);
    beta = Uniform({k.o}, seed + 4);
    mean = Uniform({k.o}, seed + 5, -0.5, 0.5);
    var = Uniform({k.o}, seed + 6, 0.2, 2.0);
  }
  std::vector<Tensor> conv_args(const Tensor& input) const {
    return b.defined() ? std::vector<Tensor>{input, w, b} : std::vector<Tensor>{input, w};
  }
};

PackedConv2d Pack(const Case& k, const Operands& op, const Shape& input, ConvLayouts layouts = {},
                  ConvAlgorithm algorithm = ConvAlgorithm::kDirect) {
  ConvEpilogue e;
  if (k.bn) e.fold_batch_norm(op.gamma, op.beta, op.mean, op.var, kEps);
  e.residual = k.residual;
  e.activation = k.act;
  return PackedConv2d(op.w, op.b, k.attrs(), input, e, layouts, algorithm);
}

Tensor Permute(const Tensor& t, std::vector<int64_t> dims) {
  return Op("permute", {t}, {{"dims", std::move(dims)}}).contiguous();
}

// A logical NCHW tensor's values as they lie in `layout`: a contiguous tensor whose buffer is
// what PackedConv2d reads or writes (NHWC: [N, H, W, C]; nChw8c: [N, C/8, H, W, 8]).
Tensor InLayout(const Tensor& t, ActivationLayout layout) {
  const Shape& s = t.shape();
  switch (layout) {
    case ActivationLayout::kNhwc:
      return Permute(t, {0, 2, 3, 1});
    case ActivationLayout::kNchw8c:
      return Permute(t.contiguous().reshape(Shape{s[0], s[1] / 8, 8, s[2], s[3]}), {0, 1, 3, 4, 2});
    case ActivationLayout::kNchw:
      break;
  }
  return t.contiguous();
}
// The logical NCHW tensor of `shape` from a buffer in `layout`.
Tensor FromLayout(const Tensor& buffer, const Shape& shape, ActivationLayout layout) {
  switch (layout) {
    case ActivationLayout::kNhwc:
      return Permute(buffer.reshape(Shape{shape[0], shape[2], shape[3], shape[1]}), {0, 3, 1, 2});
    case ActivationLayout::kNchw8c:
      return Permute(buffer.reshape(Shape{shape[0], shape[1] / 8, shape[2], shape[3], 8}),
                     {0, 1, 4, 2, 3})
          .reshape(shape);
    case ActivationLayout::kNchw:
      break;
  }
  return buffer.reshape(shape);
}

// The chain as the eager backend runs it, op by op.
Tensor EagerChain(const Case& k, const Operands& op, const Tensor& x, const Tensor& residual) {
  Tensor t = Op("conv2d", op.conv_args(x), k.attrs());
  if (k.bn) t = Op("batch_norm", {t, op.gamma, op.beta, op.mean, op.var}, {{"eps", kEps}});
  if (k.residual) t = Op("add", {t, residual});
  if (k.act == ConvActivation::kRelu) t = Op("relu", {t});
  if (k.act == ConvActivation::kClamp) t = Op("clamp", {t}, {{"min", 0.0}, {"max", 6.0}});
  if (k.act == ConvActivation::kSigmoid) t = Op("sigmoid", {t});
  if (k.act == ConvActivation::kSilu) t = Op("silu", {t});
  if (k.act == ConvActivation::kHardsigmoid) t = Op("hardsigmoid", {t});
  if (k.act == ConvActivation::kHardswish) t = Op("hardswish", {t});
  return t;
}

// Checks `got` against eager's chain element by element. Both compute the same real number with
// different roundings: a K-term dot product errs by at most K*u*sum|x w| in any order, the fold
// and batch norm's (x - mean) * scale + beta a few roundings of the magnitudes they touch (|mean|
// and |beta| too: where the window sees only padding the result is the shift alone, a difference
// of terms that may be far larger), and relu or clamp never enlarge a difference. So each side is
// within (K + 8)*u*S of the exact value, S = (sum|x w| + |b| + |mean|)*|scale| + |beta| +
// |residual|, and they differ by at most twice that. A dropped or misplaced step (no batch norm,
// relu before the add, a lost residual) is off by O(1). Winograd holds the same bound (its
// transforms add roundings, but the bound counts every term's magnitude: the largest difference
// measured is a third of it). Returns the largest difference as a fraction of the bound.
double ExpectMatchesEager(const Case& k, const Operands& op, const Tensor& x,
                          const Tensor& residual, const Tensor& got) {
  const Tensor want = EagerChain(k, op, x, residual);
  EXPECT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  if (got.shape() != want.shape()) return INFINITY;
  std::vector<Tensor> abs_args{Abs64(x), Abs64(op.w)};
  if (op.b.defined()) abs_args.push_back(Abs64(op.b));
  const std::vector<double> mag = Op("conv2d", abs_args, k.attrs()).to_doubles();
  const std::vector<double> g = got.to_doubles(), e = want.to_doubles();
  const std::vector<double> res =
      residual.defined() ? residual.to_doubles() : std::vector<double>(g.size(), 0.0);
  std::vector<double> scale(k.o, 1.0), centre(k.o, 0.0), beta(k.o, 0.0);
  if (k.bn) {
    ConvEpilogue fold;
    fold.fold_batch_norm(op.gamma, op.beta, op.mean, op.var, kEps);
    scale = fold.scale;
    centre = op.mean.to_doubles();
    beta = op.beta.to_doubles();
  }
  const double terms = static_cast<double>(k.c / k.groups * k.k * k.k + 8);
  constexpr double kSlope = 1.5;
  const int64_t plane = got.shape()[2] * got.shape()[3];
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    const int64_t oc = static_cast<int64_t>(i) / plane % k.o;
    const double s = (mag[i] + std::abs(centre[oc])) * std::abs(scale[oc]) + std::abs(beta[oc]) +
                     std::abs(res[i]);
    // An activation moves a difference by at most its steepest slope (hardswish's 1.5, silu's 1.1)
    // and rounds its result a few times more.
    const double tol = 2 * terms * 0x1p-24 * s * kSlope + 8 * 0x1p-24 * std::abs(e[i]);
    worst = std::max(worst, std::abs(g[i] - e[i]) / tol);
    if (!(std::abs(g[i] - e[i]) <= tol)) {
      ADD_FAILURE() << "output " << i << ": packed " << g[i] << ", eager " << e[i] << " (tol "
                    << tol << ")";
      ++bad;
    }
  }
  return worst;
}

// Packs for the case's shape, runs, and compares with eager. `in_place` passes the residual as y.
// `layouts`: how x, y and the residual lie in memory (the values compared are the same).
// `algorithm` kWinograd asserts Winograd runs where the CPU has it. Returns the largest difference
// as a fraction of the bound.
double CheckCase(const Case& k, uint64_t seed, bool in_place = false, ConvLayouts layouts = {},
                 ConvAlgorithm algorithm = ConvAlgorithm::kDirect) {
  SCOPED_TRACE(k.str() + (in_place ? " in place " : " ") + layout_name(layouts.src) + " -> " +
               layout_name(layouts.dst));
  const Operands op(k, seed);
  const PackedConv2d conv = Pack(k, op, k.input(), layouts, algorithm);
  EXPECT_EQ(conv.uses_winograd(), algorithm == ConvAlgorithm::kWinograd) << conv.describe();
  if (conv.uses_winograd()) {
    EXPECT_EQ(conv.describe().find("(ours") == std::string::npos, CpuHasOneDnnWinograd())
        << conv.describe();
  }
  const Shape out_shape = conv.output_shape(k.input());
  const Tensor residual = k.residual ? Uniform(out_shape, seed + 7, -2.0, 2.0) : Tensor();
  const Tensor x = InLayout(op.x, layouts.src);
  const Tensor r = k.residual ? InLayout(residual, layouts.dst) : Tensor();
  Tensor y = Tensor::empty(DType::kF32, {shape_numel(out_shape)});
  if (in_place) {
    EXPECT_TRUE(k.residual);
    std::copy_n(r.data<float>(), r.numel(), y.data<float>());
    conv.run(x.data<float>(), k.input(), y.data<float>(), y.data<float>());
  } else {
    conv.run(x.data<float>(), k.input(), y.data<float>(), k.residual ? r.data<float>() : nullptr);
  }
  return ExpectMatchesEager(k, op, op.x, residual, FromLayout(y, out_shape, layouts.dst));
}

Case RandomCase(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (;;) {
    Case k{};
    const int64_t mode = pick(0, 3);  // dense, grouped, depthwise, depthwise with multiplier 2
    const int64_t cg = mode >= 2 ? 1 : pick(1, 40);
    k.groups = mode == 0 ? 1 : mode == 1 ? pick(2, 4) : pick(3, 40);
    k.c = cg * k.groups;
    k.o = k.groups * (mode == 2 ? 1 : mode == 3 ? 2 : pick(1, 40));
    k.n = pick(0, 2) == 0 ? 1 : pick(2, 3);
    k.h = pick(1, 19);
    k.w = pick(1, 19);
    const int64_t kernels[] = {1, 3, 5, 7};
    k.k = kernels[pick(0, 3)];
    k.stride = pick(1, 2);
    k.pad = pick(0, k.k / 2 + 1);
    k.dilation = pick(0, 4) == 0 ? 2 : 1;
    k.bias = pick(0, 1) == 1;
    k.bn = pick(0, 3) != 0;
    k.residual = pick(0, 1) == 1;
    k.act = static_cast<ConvActivation>(pick(0, 6));
    if (k.dilation * (k.k - 1) + 1 <= std::min(k.h, k.w) + 2 * k.pad) return k;
  }
}

TEST(PackedConv2d, RandomizedShapesMatchEagerChain) {
  std::mt19937 rng(20260415);
  for (int i = 0; i < 80; ++i) {
    const Case k = RandomCase(rng);
    CheckCase(k, 100 + 10 * i, k.residual && i % 2 == 1);  // some residuals in y itself
  }
}

bool Depthwise(const Case& k) { return k.groups == k.c && k.groups > 1; }

// The layers the vision models run, at reduced batch and size: every kernel path (1x1 on plain
// activations, 3x3 on blocked ones, the 3-channel stem, depthwise) with each epilogue.
constexpr ConvActivation kNone = ConvActivation::kNone, kRelu = ConvActivation::kRelu,
                         kClamp = ConvActivation::kClamp;
const Case kModelLayers[] = {
    {2, 32, 14, 14, 32, 3, 1, 1, 1, 1, false, true, true, kRelu},     // ResNet basic block
    {2, 64, 14, 14, 16, 1, 1, 0, 1, 1, false, true, true, kRelu},     // bottleneck conv3-ish
    {2, 64, 14, 14, 32, 1, 2, 0, 1, 1, false, true, false, kNone},    // downsample 1x1/2
    {1, 3, 45, 45, 16, 7, 2, 3, 1, 1, false, true, false, kRelu},     // stem
    {3, 16, 15, 15, 48, 1, 1, 0, 1, 1, false, true, false, kClamp},   // MobileNet expand
    {3, 48, 15, 15, 48, 3, 2, 1, 1, 48, false, true, false, kClamp},  // depthwise /2
    {3, 48, 8, 8, 48, 3, 1, 1, 1, 48, false, true, true, kNone},      // depthwise + residual
    {3, 48, 8, 8, 16, 1, 1, 0, 1, 1, false, true, true, kNone},       // projection + add
    {1, 24, 9, 11, 40, 3, 1, 1, 1, 1, true, false, false, kNone},     // plain conv + bias
    {2, 20, 9, 9, 40, 5, 1, 2, 1, 4, true, true, true, kClamp},       // grouped 5x5
    // EfficientNet's and MobileNetV3's: silu and hardswish after 1x1 and depthwise convolutions,
    // the squeeze-excite gates (sigmoid, hardsigmoid) after a 1x1 on pooled features.
    {2, 16, 12, 12, 96, 1, 1, 0, 1, 1, false, true, false, ConvActivation::kSilu},
    {2, 96, 12, 12, 96, 5, 2, 2, 1, 96, false, true, false, ConvActivation::kSilu},
    {1, 72, 14, 13, 72, 3, 1, 1, 1, 72, false, true, false, ConvActivation::kHardswish},
    {1, 24, 10, 10, 120, 1, 1, 0, 1, 1, false, true, false, ConvActivation::kHardswish},
    {2, 32, 1, 1, 120, 1, 1, 0, 1, 1, true, false, false, ConvActivation::kHardsigmoid},
    {2, 8, 1, 1, 96, 1, 1, 0, 1, 1, true, false, false, ConvActivation::kSigmoid},
};

TEST(PackedConv2d, ModelLayersMatchEagerChain) {
  uint64_t seed = 1;
  for (const Case& k : kModelLayers) CheckCase(k, seed += 10);
}

// Codegen keeps chains of convolutions channels-last: every layout pair on the model layers
// (depthwise: NHWC in and out, with one output channel per input channel), in place too, and on
// randomized shapes.
TEST(PackedConv2d, ChannelsLastLayoutsMatchEagerChain) {
  using L = ActivationLayout;
  const ConvLayouts pairs[] = {{L::kNhwc, L::kNhwc}, {L::kNchw, L::kNhwc}, {L::kNhwc, L::kNchw}};
  uint64_t seed = 2000;
  for (const Case& k : kModelLayers) {
    for (const ConvLayouts& l : pairs) {
      if (Depthwise(k) && l.src != l.dst) continue;
      CheckCase(k, seed += 10, false, l);
      if (k.residual) CheckCase(k, seed += 10, true, l);
    }
  }
  std::mt19937 rng(20261125);
  for (int i = 0; i < 60; ++i) {
    const Case k = RandomCase(rng);
    if (!Depthwise(k)) {
      CheckCase(k, 3000 + 10 * i, false, pairs[i % 3]);
    } else if (k.o == k.c) {
      CheckCase(k, 3000 + 10 * i, k.residual, pairs[0]);
    }
  }
}

// Codegen keeps chains of dense convolutions in nChw8c where oneDNN has no brgemm kernels (AVX2):
// every layout pair on the model layers whose channels fill blocks of 8, in place too, and on
// randomized shapes rounded to such channel counts; the others are refused with the reason.
TEST(PackedConv2d, BlockedLayoutsMatchEagerChain) {
  using L = ActivationLayout;
  const ConvLayouts pairs[] = {
      {L::kNchw8c, L::kNchw8c}, {L::kNchw, L::kNchw8c}, {L::kNchw8c, L::kNchw}};
  auto fits = [](const Case& k, const ConvLayouts& l) {
    return (l.src != L::kNchw8c || k.c % 8 == 0) && (l.dst != L::kNchw8c || k.o % 8 == 0);
  };
  uint64_t seed = 5000;
  int checked = 0;
  for (const Case& k : kModelLayers) {
    for (const ConvLayouts& l : pairs) {
      const Operands op(k, seed += 10);
      if (Depthwise(k) && l.src != l.dst) {
        ExpectErrorWith([&] { Pack(k, op, k.input(), l); }, "takes one layout in and out");
      } else if (!fits(k, l)) {
        ExpectErrorWith([&] { Pack(k, op, k.input(), l); }, "needs channels divisible by 8");
      } else {
        CheckCase(k, seed, false, l);
        if (k.residual) CheckCase(k, seed + 5, true, l);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 15);  // most model layers run blocked
  // Depthwise on nChw8c takes a zero-padded tile per block on planes narrower than 40 (the model
  // layers above) and the per-row loop with border pixels on wider ones: 3x3, 5x5/2 and dilated.
  for (const Case& k : {Case{2, 16, 9, 45, 16, 3, 1, 1, 1, 16, true, true, true, kRelu},
                        Case{1, 24, 7, 90, 24, 5, 2, 2, 1, 24, false, true, false, kClamp},
                        Case{1, 8, 11, 50, 8, 3, 1, 2, 2, 8, false, true, true, kNone}}) {
    CheckCase(k, seed += 10, k.residual, pairs[0]);
  }
  std::mt19937 rng(20261127);
  for (int i = 0; i < 40; ++i) {
    Case k = RandomCase(rng);
    if (Depthwise(k)) {
      // Our depthwise loop on blocks of 8 channels: one layout in and out, multiplier one.
      k.c = k.o = k.groups = (k.c + 7) / 8 * 8;
      CheckCase(k, 6000 + 10 * i, k.residual, pairs[0]);
      continue;
    }
    k.c = (k.c / k.groups + 7) / 8 * 8 * k.groups;  // channels per group a multiple of 8
    k.o = (k.o / k.groups + 7) / 8 * 8 * k.groups;
    CheckCase(k, 6000 + 10 * i, k.residual && i % 2 == 1, pairs[i % 3]);
  }
}

// Whatever the caller's layouts, a convolution never runs oneDNN's reference kernel (on AVX2
// oneDNN 2.6 has nothing else for some problems in a channels-inner layout, such as AlexNet's
// 11x11/4 stem writing nChw8c or NHWC: a thousand times slower than GEMM and a reorder), and the
// reordered problem it runs instead matches eager.
TEST(PackedConv2d, NoLayoutLeavesAConvolutionOnTheReferenceKernel) {
  using L = ActivationLayout;
  const Case stems[] = {
      {1, 3, 63, 63, 64, 11, 4, 2, 1, 1, true, false, false, ConvActivation::kRelu},  // AlexNet
      {1, 3, 45, 45, 16, 7, 2, 3, 1, 1, false, true, false, ConvActivation::kRelu},   // ResNet
      {1, 16, 20, 20, 24, 5, 2, 2, 1, 1, false, true, false, ConvActivation::kNone},
      {1, 16, 20, 20, 16, 3, 1, 2, 2, 1, false, true, true, ConvActivation::kRelu},  // dilated
      {2, 32, 9, 9, 64, 3, 2, 1, 1, 4, false, true, false, ConvActivation::kRelu},   // grouped
  };
  const ConvLayouts pairs[] = {{L::kNchw, L::kNchw8c},   {L::kNchw, L::kNhwc},
                               {L::kNchw8c, L::kNchw8c}, {L::kNhwc, L::kNhwc},
                               {L::kNchw8c, L::kNchw},   {L::kNhwc, L::kNchw}};
  uint64_t seed = 7000;
  for (const Case& k : stems) {
    for (const ConvLayouts& l : pairs) {
      if ((l.src == L::kNchw8c && k.c % 8 != 0) || (l.dst == L::kNchw8c && k.o % 8 != 0)) continue;
      const Operands op(k, seed += 10);
      const std::string d = Pack(k, op, k.input(), l).describe();
      EXPECT_EQ(d.find("ref:"), std::string::npos) << k.str() << ": " << d;
      CheckCase(k, seed, false, l);
    }
  }
}

// Winograd (3x3, stride 1, dense) against eager's direct chain: every layout pair, epilogues, in
// place, every activation, random channel counts and sizes; a strided, dilated or widely padded
// 3x3 does not take it.
TEST(PackedConv2d, WinogradMatchesEagerWithinItsBound) {
  using L = ActivationLayout;
  std::mt19937 rng(20261126);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const ConvLayouts pairs[] = {{}, {L::kNhwc, L::kNhwc}, {L::kNchw, L::kNhwc}};
  // Blocked on either side, as codegen's chains start, run and end.
  const ConvLayouts blocked[] = {{L::kNchw8c, L::kNchw8c},
                                 {L::kNchw8c, L::kNchw},
                                 {L::kNchw, L::kNchw8c},
                                 {L::kNhwc, L::kNchw8c}};
  double worst = 0;
  for (int i = 0; i < 24; ++i) {
    Case k{pick(1, 3), pick(1, 80), pick(3, 20), pick(3, 20), pick(1, 80), 3};
    k.pad = pick(0, 1);
    k.bias = pick(0, 1) == 1;
    k.bn = pick(0, 3) != 0;
    k.residual = pick(0, 1) == 1;
    k.act = static_cast<ConvActivation>(pick(0, 6));  // every activation, in the output transform
    if (i % 4 == 3) {  // every fourth from nChw8c, its channels rounded up to whole blocks
      k.c = (k.c + 7) / 8 * 8;
      k.o = (k.o + 7) / 8 * 8;
    }
    worst = std::max(
        worst, CheckCase(k, 4000 + 10 * i, k.residual && i % 2 == 0,
                         i % 4 == 3 ? blocked[i / 4 % 4] : pairs[i % 3], ConvAlgorithm::kWinograd));
  }
  // Wide enough that our Winograd (winograd_f4x3.cpp) takes its 128 tiles in two chunks, the
  // second partial.
  const Case wide{2, 256, 32, 32, 256, 3, 1, 1, 1, 1, false, true, true, ConvActivation::kRelu};
  worst = std::max(worst, CheckCase(wide, 4500, true, blocked[0], ConvAlgorithm::kWinograd));
  worst = std::max(worst, CheckCase(wide, 4510, false, pairs[0], ConvAlgorithm::kWinograd));
  std::printf("Winograd's largest difference: %.3f of its bound\n", worst);
  // Strided, dilated, or padded past 1 (edge windows mostly padding): the direct kernel.
  for (const Case& k : {Case{1, 16, 9, 9, 16, 3, 2, 1}, Case{1, 16, 9, 9, 16, 3, 1, 2, 2},
                        Case{1, 16, 9, 9, 16, 3, 1, 2}, Case{1, 16, 9, 9, 16, 3, 1, 3}}) {
    const Operands op(k, 77);
    EXPECT_FALSE(Pack(k, op, k.input(), {}, ConvAlgorithm::kWinograd).uses_winograd()) << k.str();
  }
}

// A NaN, an infinity or a value Winograd's transforms could overflow sends the call to the direct
// kernel: the output is the direct plan's bit for bit (Winograd would spread a NaN over a tile).
TEST(PackedConv2d, WinogradLeavesNonFiniteInputsToTheDirectKernel) {
  const Case k{2, 24, 12, 12, 24, 3, 1, 1, 1, 1, true, true, true, ConvActivation::kRelu};
  const Operands op(k, 91);
  const PackedConv2d wino = Pack(k, op, k.input(), {}, ConvAlgorithm::kWinograd);
  const PackedConv2d direct = Pack(k, op, k.input(), {}, ConvAlgorithm::kDirect);
  ASSERT_TRUE(wino.uses_winograd());
  const Shape out = wino.output_shape(k.input());
  const Tensor residual = Uniform(out, 92);
  for (const float planted : {std::nanf(""), INFINITY, -INFINITY, 0x1p70f}) {
    SCOPED_TRACE(planted);
    Tensor x = op.x.contiguous();
    x.data<float>()[24 * 144 + 5 * 12 + 7] = planted;  // image 1, channel 0
    Tensor a = Tensor::empty(DType::kF32, out), b = Tensor::empty(DType::kF32, out);
    wino.run(x.data<float>(), k.input(), a.data<float>(), residual.data<float>());
    direct.run(x.data<float>(), k.input(), b.data<float>(), residual.data<float>());
    EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)), 0);
  }
}

// relu and clamp run as oneDNN's clip post-op when the call's input is finite and bounded, and in
// our pass otherwise (clip turns NaN into a bound). Both give the same bits wherever the planted
// value does not reach; where a NaN does, the output stays NaN as eager's chain keeps it.
TEST(PackedConv2d, TheActivationRunsInOneDnnOnlyOnFiniteInputs) {
  using L = ActivationLayout;
  struct Layer {
    Case k;
    ConvLayouts layouts;
  };
  const Layer layers[] = {
      {{2, 24, 8, 8, 48, 1, 1, 0, 1, 1, false, true, false, ConvActivation::kClamp},
       {L::kNhwc, L::kNhwc}},
      {{2, 24, 8, 8, 48, 1, 1, 0, 1, 1, true, false, false, ConvActivation::kRelu},
       {L::kNhwc, L::kNhwc}},
      {{2, 16, 9, 9, 32, 3, 1, 1, 1, 1, false, true, false, ConvActivation::kRelu},
       {L::kNhwc, L::kNhwc}},
      {{2, 16, 9, 9, 32, 3, 1, 1, 1, 1, false, true, false, ConvActivation::kClamp}, {}},
  };
  for (const Layer& l : layers) {
    const Case& k = l.k;
    SCOPED_TRACE(k.str() + " " + layout_name(l.layouts.src));
    const Operands op(k, 120);
    const PackedConv2d conv = Pack(k, op, k.input(), l.layouts);
    EXPECT_NE(conv.describe().find("clip on finite inputs"), std::string::npos) << conv.describe();
    const Shape out = conv.output_shape(k.input());
    const Tensor x = InLayout(op.x, l.layouts.src);
    Tensor clean = Tensor::empty(DType::kF32, {shape_numel(out)});
    conv.run(x.data<float>(), k.input(), clean.data<float>());
    const Tensor clean_nchw = FromLayout(clean, out, l.layouts.dst);
    ExpectMatchesEager(k, op, op.x, Tensor(), clean_nchw);
    const int64_t ph = 4, pw = 5;  // image 1, channel 3
    for (const float planted : {std::nanf(""), INFINITY, -INFINITY, 0x1p70f}) {
      SCOPED_TRACE(planted);
      Tensor xp = op.x.clone();
      xp.data<float>()[((1 * k.c + 3) * k.h + ph) * k.w + pw] = planted;
      const Tensor xl = InLayout(xp, l.layouts.src);
      Tensor y = Tensor::empty(DType::kF32, {shape_numel(out)});
      conv.run(xl.data<float>(), k.input(), y.data<float>());
      const Tensor got = FromLayout(y, out, l.layouts.dst);
      const float* g = got.data<float>();
      const float* c = clean_nchw.data<float>();
      const int64_t reach = k.k / 2;  // outputs whose window holds the planted pixel
      int differ = 0, nan_kept = 0;
      for (int64_t n = 0; n < k.n; ++n)
        for (int64_t o = 0; o < k.o; ++o)
          for (int64_t i = 0; i < k.h; ++i)
            for (int64_t j = 0; j < k.w; ++j) {
              const int64_t at = ((n * k.o + o) * k.h + i) * k.w + j;
              const bool reached = n == 1 && std::abs(i - ph) <= reach && std::abs(j - pw) <= reach;
              if (!reached) {
                differ += std::memcmp(&g[at], &c[at], sizeof(float)) != 0;
              } else if (std::isnan(planted)) {
                nan_kept += std::isnan(g[at]);
              }
            }
      EXPECT_EQ(differ, 0);
      if (std::isnan(planted)) {
        // Every output the NaN reaches is NaN (in a 3x3 the window's centre tap holds it).
        EXPECT_EQ(nan_kept, k.o * (k.k == 1 ? 1 : 9));
      }
    }
  }
  // Not where it could differ: a residual, a bound of -0, weights whose sums could overflow.
  const Case k{2, 24, 8, 8, 48, 1, 1, 0, 1, 1, false, false, false, ConvActivation::kClamp};
  const Operands op(k, 130);
  const ConvLayouts nhwc{L::kNhwc, L::kNhwc};
  ConvEpilogue e;
  e.activation = ConvActivation::kClamp;
  e.clamp_min = -0.0;
  EXPECT_EQ(PackedConv2d(op.w, Tensor(), k.attrs(), k.input(), e, nhwc).describe().find("clip"),
            std::string::npos);
  e.clamp_min = 0.0;
  e.residual = true;
  EXPECT_EQ(PackedConv2d(op.w, Tensor(), k.attrs(), k.input(), e, nhwc).describe().find("clip"),
            std::string::npos);
  e.residual = false;
  Tensor huge = op.w.clone();
  huge.data<float>()[5] = 0x1p61f;
  EXPECT_EQ(PackedConv2d(huge, Tensor(), k.attrs(), k.input(), e, nhwc).describe().find("clip"),
            std::string::npos);
  const std::string fine = PackedConv2d(op.w, Tensor(), k.attrs(), k.input(), e, nhwc).describe();
  EXPECT_NE(fine.find("clip"), std::string::npos) << fine;
}

// `fastest` keeps Winograd only when its fastest run takes at most 0.9 of the direct kernel's: a
// near tie stays direct (Winograd rounds more), and one clean run among ones a loaded machine
// inflated is the estimate. The CI case: 3 runs each, direct all preempted, a 2.5x slower
// Winograd won.
TEST(TimedChoice, ChallengerMustClearlyWinOnItsFastestRun) {
  using V = std::vector<double>;
  EXPECT_FALSE(vision::challenger_wins(V{1.0, 1.1}, V{1.0, 0.98}, 0.9));  // a tie
  EXPECT_FALSE(vision::challenger_wins(V{1.0}, V{0.95}, 0.9));
  EXPECT_TRUE(vision::challenger_wins(V{1.0}, V{0.9}, 0.9));
  EXPECT_TRUE(vision::challenger_wins(V{3.0, 1.0, 2.0}, V{0.5, 4.0}, 0.9));
  EXPECT_FALSE(
      vision::challenger_wins(V{2e-3, 3.1e-5, 1e-3, 9e-4}, V{8e-5, 7.5e-5, 2e-3, 7.7e-5}, 0.9));
  EXPECT_TRUE(vision::challenger_wins(V{2e-3, 1e-3, 9e-4}, V{8e-5, 7.5e-5}, 0.9));
  EXPECT_FALSE(vision::challenger_wins(V{}, V{0.1}, 0.9));
  EXPECT_FALSE(vision::challenger_wins(V{1.0}, V{}, 0.9));
  EXPECT_FALSE(vision::challenger_wins(V{NAN}, V{0.1}, 0.9));
  EXPECT_FALSE(vision::challenger_wins(V{1.0}, V{NAN, 0.1}, 0.9));
}

// A race warms each side once, then alternates them: at least min_rounds rounds, more while
// within the budget, never more than max_rounds.
TEST(TimedChoice, RaceAlternatesForItsRounds) {
  for (const auto& [budget, rounds] : {std::pair{0.0, 8}, std::pair{1e9, 64}}) {
    std::string order;
    const vision::RaceTimes t =
        vision::race([&] { order += 'i'; }, [&] { order += 'c'; }, {8, 64, budget});
    EXPECT_EQ(t.incumbent.size(), size_t(rounds));
    EXPECT_EQ(t.challenger.size(), size_t(rounds));
    std::string want;
    for (int i = 0; i <= rounds; ++i) want += "ic";
    EXPECT_EQ(order, want);
    for (const double s : t.incumbent) EXPECT_GE(s, 0.0);
  }
}

// A key's first decide() runs its race; later ones reuse the outcome without racing, and other
// keys race for themselves.
TEST(TimedChoice, EachKeyRacesOnce) {
  vision::RaceOutcomes outcomes;
  int races = 0;
  const auto win = [&] { return ++races, true; };
  const auto lose = [&] { return ++races, false; };
  EXPECT_TRUE(outcomes.decide("16x16x9x9", win));
  EXPECT_TRUE(outcomes.decide("16x16x9x9", lose));
  EXPECT_EQ(races, 1);
  EXPECT_FALSE(outcomes.decide("16x16x9x10", lose));
  EXPECT_FALSE(outcomes.decide("16x16x9x10", win));
  EXPECT_EQ(races, 2);
}

// Our channels-inner depthwise loop reads and writes NHWC, or nChw8c, one output channel per input
// channel; nChw8c also needs whole blocks of 8 channels.
TEST(PackedConv2d, ChannelsInnerDepthwiseNeedsOneLayoutAndMultiplierOne) {
  using L = ActivationLayout;
  const Case k{1, 8, 6, 6, 8, 3, 1, 1, 1, 8, false, true, false, ConvActivation::kRelu};
  const Operands op(k, 7);
  for (const ConvLayouts& l : {ConvLayouts{L::kNchw, L::kNhwc}, ConvLayouts{L::kNhwc, L::kNchw},
                               ConvLayouts{L::kNchw, L::kNchw8c}, ConvLayouts{L::kNchw8c, L::kNchw},
                               ConvLayouts{L::kNhwc, L::kNchw8c}}) {
    ExpectErrorWith([&] { Pack(k, op, k.input(), l); }, "takes one layout in and out");
  }
  Case twice = k;
  twice.o = 16;
  const Operands op2(twice, 8);
  for (const L layout : {L::kNhwc, L::kNchw8c}) {
    ExpectErrorWith(
        [&] {
          Pack(twice, op2, twice.input(), {layout, layout});
        },
        "one output channel per input channel");
  }
  const Case partial{1, 12, 6, 6, 12, 3, 1, 1, 1, 12, false, true, false, ConvActivation::kRelu};
  const Operands op3(partial, 9);
  ExpectErrorWith(
      [&] {
        Pack(partial, op3, partial.input(), {L::kNchw8c, L::kNchw8c});
      },
      "needs channels divisible by 8");
}

// Codegen hands the residual's own buffer in as y when the residual dies at the convolution: each
// path must read the residual before the result replaces it.
TEST(PackedConv2d, ResidualMayBeTheOutputBuffer) {
  using A = ConvActivation;
  const Case cases[] = {
      {2, 64, 10, 10, 24, 1, 1, 0, 1, 1, false, true, true, A::kRelu},   // plain GEMM path
      {2, 32, 10, 10, 32, 3, 1, 1, 1, 1, false, true, true, A::kRelu},   // blocked, post-ops
      {2, 24, 10, 10, 24, 3, 1, 1, 1, 24, true, true, true, A::kClamp},  // depthwise rows
      {1, 8, 7, 7, 16, 1, 1, 0, 1, 1, true, false, true, A::kNone},      // sum alone
  };
  uint64_t seed = 500;
  for (const Case& k : cases) CheckCase(k, seed += 10, /*in_place=*/true);
}

// Weights are packed for one shape; other batch sizes and images get their own plans (and their
// own weight copy where oneDNN wants another layout), with the same results.
TEST(PackedConv2d, RunsOnOtherInputShapes) {
  for (int64_t k : {1, 3}) {
    const Case base{4, 32, 16, 16, 32, k, 1, k / 2, 1, 1, true, true, true, ConvActivation::kRelu};
    const Operands op(base, 900 + k);
    const PackedConv2d conv = Pack(base, op, base.input());
    for (const Shape& in : {Shape{1, 32, 16, 16}, Shape{3, 32, 5, 9}, Shape{4, 32, 16, 16}}) {
      Case other = base;
      other.n = in[0];
      other.h = in[2];
      other.w = in[3];
      SCOPED_TRACE(other.str());
      const Tensor x = Uniform(in, 950);
      const Tensor residual = Uniform(conv.output_shape(in), 951);
      Tensor y = Tensor::empty(DType::kF32, conv.output_shape(in));
      conv.prepare(in);
      conv.run(x.data<float>(), in, y.data<float>(), residual.data<float>());
      ExpectMatchesEager(other, op, x, residual, y);
    }
    EXPECT_GE(conv.packed_bytes(), 32u * 32 * k * k * sizeof(float));
  }
}

// On plain activations a large batch runs a few images per oneDNN call (1.3 MB of output per
// image here: three per call), each followed by its epilogue pass: every slice must land at its
// images, in place or not.
TEST(PackedConv2d, LargeBatchesRunInSlicesOfImages) {
  const Case k{6, 8, 64, 64, 80, 1, 1, 0, 1, 1, true, true, true, ConvActivation::kRelu};
  CheckCase(k, 1200);
  CheckCase(k, 1300, /*in_place=*/true);
  Case relu6 = k;
  relu6.residual = false;
  relu6.act = ConvActivation::kClamp;
  CheckCase(relu6, 1400);
}

TEST(PackedConv2d, CallerTensorsMayDieAfterConstruction) {
  const Case k{2, 16, 9, 9, 24, 3, 1, 1, 1, 1, true, true, false, ConvActivation::kRelu};
  const Operands op(k, 77);
  std::optional<PackedConv2d> conv;
  {
    const Operands copy(k, 77);
    conv.emplace(Pack(k, copy, k.input()));
    copy.w.data<float>()[0] = 1e6f;  // changed after packing: must not matter
  }
  Tensor y = Tensor::empty(DType::kF32, conv->output_shape(k.input()));
  conv->run(op.x.data<float>(), k.input(), y.data<float>());
  ExpectMatchesEager(k, op, op.x, Tensor(), y);
}

TEST(PackedConv2d, ConcurrentRunsFromTwoThreads) {
  const Case k{2, 32, 12, 12, 32, 3, 1, 1, 1, 1, false, true, true, ConvActivation::kRelu};
  const Operands op(k, 31);
  const PackedConv2d conv = Pack(k, op, k.input());
  const Shape out = conv.output_shape(k.input());
  const Tensor residual = Uniform(out, 32);
  Tensor y1 = Tensor::empty(DType::kF32, out), y2 = Tensor::empty(DType::kF32, out);
  auto work = [&](Tensor& y) {
    for (int r = 0; r < 20; ++r) {
      conv.run(op.x.data<float>(), k.input(), y.data<float>(), residual.data<float>());
    }
  };
  std::thread t1(work, std::ref(y1)), t2(work, std::ref(y2));
  t1.join();
  t2.join();
  ExpectMatchesEager(k, op, op.x, residual, y1);
  ExpectMatchesEager(k, op, op.x, residual, y2);
}

TEST(PackedConv2d, FoldBatchNormComputesScaleAndShift) {
  ConvEpilogue e;
  e.fold_batch_norm(
      testing::T(DType::kF32, {2}, {2.0, -1.0}), testing::T(DType::kF32, {2}, {0.5, 0.25}),
      testing::T(DType::kF32, {2}, {1.0, -3.0}), testing::T(DType::kF32, {2}, {3.0, 0.0}), 1.0);
  ASSERT_EQ(e.scale.size(), 2u);
  EXPECT_DOUBLE_EQ(e.scale[0], 1.0);    // 2 / sqrt(3 + 1)
  EXPECT_DOUBLE_EQ(e.scale[1], -1.0);   // -1 / sqrt(0 + 1)
  EXPECT_DOUBLE_EQ(e.shift[0], -0.5);   // 0.5 - 1 * 1
  EXPECT_DOUBLE_EQ(e.shift[1], -2.75);  // 0.25 - (-3) * (-1)
  e.residual = true;
  e.activation = ConvActivation::kClamp;
  EXPECT_EQ(e.name(), "affine+add+relu6");
  EXPECT_EQ(ConvEpilogue{}.name(), "none");
}

TEST(PackedConv2d, DescribeNamesTheKernelPath) {
  const Tensor w3 = Uniform({32, 32, 3, 3}, 1), w1 = Uniform({32, 32, 1, 1}, 2),
               wd = Uniform({32, 1, 3, 3}, 3);
  const Attrs pad1{{"padding", std::vector<int64_t>{1}}};
  const Attrs dw{{"padding", std::vector<int64_t>{1}}, {"groups", int64_t{32}}};
  ConvEpilogue relu;
  relu.activation = ConvActivation::kRelu;
  const std::string d3 = PackedConv2d(w3, Tensor(), pad1, {8, 32, 28, 28}, relu).describe();
  const std::string d1 = PackedConv2d(w1, Tensor(), {}, {8, 32, 28, 28}, relu).describe();
  const std::string dd = PackedConv2d(wd, Tensor(), dw, {8, 32, 28, 28}, relu).describe();
  EXPECT_EQ(d3.find("activations nchw -> nchw"), std::string::npos) << d3;
  // relu as a oneDNN post-op only on finite inputs (it drops NaN): else our pass applies it.
  EXPECT_NE(d3.find("epilogue in a pass after"), std::string::npos) << d3;
  EXPECT_NE(d1.find("gemm"), std::string::npos) << d1;
  EXPECT_NE(d1.find("activations nchw -> nchw, epilogue in a pass after"), std::string::npos) << d1;
  EXPECT_NE(dd.find("direct depthwise loop"), std::string::npos) << dd;
  EXPECT_NE(d3.find("relu epilogue"), std::string::npos) << d3;
  using L = ActivationLayout;
  const std::string db =
      PackedConv2d(w3, Tensor(), pad1, {8, 32, 28, 28}, relu, {L::kNchw8c, L::kNchw8c}).describe();
  EXPECT_NE(db.find("caller's activations nChw8c -> nChw8c"), std::string::npos) << db;
}

TEST(PackedConv2d, RejectsBadOperands) {
  const Tensor w = Uniform({8, 4, 3, 3}, 1);
  const Shape in{1, 4, 8, 8};
  ExpectErrorWith([&] { PackedConv2d(w.to(DType::kF64), Tensor(), {}, in); }, "f32");
  ExpectErrorWith([&] { PackedConv2d(w, Tensor(), {}, {1, 5, 8, 8}); }, "input channels");
  ExpectErrorWith([&] { PackedConv2d(w, Uniform({7}, 2), {}, in); }, "bias shape");
  ExpectErrorWith([&] { PackedConv2d(w, Tensor(), {}, {0, 4, 8, 8}); }, "empty convolution");
  ConvEpilogue short_affine;
  short_affine.scale = {1.0};
  short_affine.shift = {0.0};
  ExpectErrorWith([&] { PackedConv2d(w, Tensor(), {}, in, short_affine); }, "8 values");
  ConvEpilogue bad_clamp;
  bad_clamp.activation = ConvActivation::kClamp;
  bad_clamp.clamp_min = 6.0;
  bad_clamp.clamp_max = 0.0;
  ExpectErrorWith([&] { PackedConv2d(w, Tensor(), {}, in, bad_clamp); }, "clamp bounds");

  ConvEpilogue with_residual;
  with_residual.residual = true;
  const PackedConv2d conv(w, Tensor(), {}, in, with_residual);
  const Tensor x = Uniform(in, 3);
  Tensor y = Tensor::empty(DType::kF32, conv.output_shape(in));
  ExpectErrorWith([&] { conv.run(x.data<float>(), in, y.data<float>()); }, "none given");
  ExpectErrorWith(
      [&] {
        conv.run(x.data<float>(), {1, 3, 8, 8}, y.data<float>(), y.data<float>());
      },
      "[N,4,H,W]");
}

}  // namespace
}  // namespace crucible
