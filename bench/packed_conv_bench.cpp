// ResNet-50, MobileNetV2 and EfficientNet layers as eager runs them (conv2d, batch_norm, add, the
// activation: one op call each) against PackedConv2d (weights packed and batch norm folded once,
// epilogue fused).
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "bounds.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ops/packed_conv.h"
#include "random_tensor.h"

namespace crucible::bench {
namespace {

// One conv -> batch_norm [-> add] -> relu/relu6/silu layer at batch 8, its operands drawn once.
struct Layer {
  int64_t c, hw, o, k, stride = 1, groups = 1;
  bool residual = false;
  ConvActivation act = ConvActivation::kRelu;

  int64_t out_hw() const { return (hw + 2 * (k / 2) - k) / stride + 1; }
  Attrs attrs() const {
    return {{"stride", std::vector<int64_t>{stride}},
            {"padding", std::vector<int64_t>{k / 2}},
            {"groups", groups}};
  }
  double flops() const { return 2.0 * 8 * o * out_hw() * out_hw() * (c / groups) * k * k; }
};

struct Operands {
  Tensor x, w, gamma, beta, mean, var, residual;
  explicit Operands(const Layer& l) {
    const double ws = 2.0 / std::sqrt(static_cast<double>(l.c / l.groups * l.k * l.k));
    x = uniform({8, l.c, l.hw, l.hw}, 1, -1.0, 1.0);
    w = uniform({l.o, l.c / l.groups, l.k, l.k}, 2, -ws, ws);
    gamma = uniform({l.o}, 3, 0.5, 1.5);
    beta = uniform({l.o}, 4, -0.2, 0.2);
    mean = uniform({l.o}, 5, -0.2, 0.2);
    var = uniform({l.o}, 6, 0.5, 1.5);
    if (l.residual) residual = uniform({8, l.o, l.out_hw(), l.out_hw()}, 7, -1.0, 1.0);
  }
};

// As the eager backend runs the layer: one op call per node, each with a fresh output.
void run_eager(benchmark::State& state, const Layer& l) {
  const Operands op(l);
  const std::vector<Tensor> conv_args{op.x, op.w};
  auto layer = [&] {
    Tensor t = run_op("conv2d", conv_args, l.attrs());
    std::vector<Tensor> bn{t, op.gamma, op.beta, op.mean, op.var};
    t = run_op("batch_norm", bn);
    if (l.residual) {
      std::vector<Tensor> add{t, op.residual};
      t = run_op("add", add);
    }
    std::vector<Tensor> act{t};
    if (l.act == ConvActivation::kSilu) return run_op("silu", act);
    return l.act == ConvActivation::kRelu ? run_op("relu", act)
                                          : run_op("clamp", act, {{"min", 0.0}, {"max", 6.0}});
  };
  layer();  // plans built outside the timed loop
  KernelTimer timer(state);
  for (auto _ : state) timer.time([&] { benchmark::DoNotOptimize(layer().raw_data()); });
  timer.report(0, l.flops());
}

// What codegen's extern call does: packed once (outside the timed loop, at compile time), then
// one call per run into a fresh output (the residual in its own buffer, not reused in place).
void run_packed(benchmark::State& state, const Layer& l) {
  const Operands op(l);
  ConvEpilogue e;
  e.fold_batch_norm(op.gamma, op.beta, op.mean, op.var, 1e-5);
  e.residual = l.residual;
  e.activation = l.act;
  const Shape in{8, l.c, l.hw, l.hw};
  const PackedConv2d conv(op.w, Tensor(), l.attrs(), in, e);
  state.SetLabel(conv.describe());
  const Shape out = conv.output_shape(in);
  const float* res = l.residual ? op.residual.data<float>() : nullptr;
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      Tensor y = Tensor::empty(DType::kF32, out);
      conv.run(op.x.data<float>(), in, y.data<float>(), res);
      benchmark::DoNotOptimize(y.raw_data());
    });
  }
  timer.report(0, l.flops());
}

// ResNet-50's conv2_x layers: the 3x3 64 -> 64 (conv2 of each bottleneck; with the residual add it
// is ResNet-18's basic block ending) and the 1x1 256 -> 64 that opens each bottleneck.
const Layer k3x3{64, 56, 64, 3};
const Layer k3x3Add{64, 56, 64, 3, 1, 1, true};
const Layer k1x1{256, 56, 64, 1};
const Layer k1x1Add{256, 56, 64, 1, 1, 1, true};
// MobileNetV2's depthwise 3x3 on 144 channels at 56x56 with batch norm and ReLU6.
const Layer kDepthwise{144, 56, 144, 3, 1, 144, false, ConvActivation::kClamp};
// EfficientNet-B0's depthwise 5x5 on 672 channels at 14x14 and 3x3 on 480, with batch norm and
// silu: planes of 14 outputs a row, where vectors along channels beat vectors along rows.
const Layer kDepthwise5x5Eff{672, 14, 672, 5, 1, 672, false, ConvActivation::kSilu};
const Layer kDepthwise3x3Eff{480, 14, 480, 3, 1, 480, false, ConvActivation::kSilu};

// Layer `l` (batch norm folded, no residual) packed for `layouts` and `algorithm`, run into one
// output buffer. Reports its FLOPs and the bytes its activations must move (x read, y written).
void run_laid_out(benchmark::State& state, const Layer& l, ConvLayouts layouts,
                  ConvAlgorithm algorithm) {
  const Operands op(l);
  ConvEpilogue e;
  e.fold_batch_norm(op.gamma, op.beta, op.mean, op.var, 1e-5);
  e.activation = l.act;
  const Shape in{8, l.c, l.hw, l.hw};
  const PackedConv2d conv(op.w, Tensor(), l.attrs(), in, e, layouts, algorithm);
  if (algorithm == ConvAlgorithm::kWinograd && !conv.uses_winograd()) {
    state.SkipWithError("no Winograd for this problem");
    return;
  }
  state.SetLabel(conv.describe());
  Tensor y = Tensor::empty(DType::kF32, conv.output_shape(in));
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { conv.run(op.x.data<float>(), in, y.data<float>()); });
    benchmark::DoNotOptimize(y.raw_data());
  }
  timer.report(4.0 * static_cast<double>(op.x.numel() + y.numel()), l.flops());
}

// ResNet-50's 3x3 stride-1 convolutions (with bn and relu) as codegen runs them on a CPU without
// AVX-512: nChw8c in and out, oneDNN's direct kernel against Winograd F(4x4,3x3) (oneDNN's where
// it has one, else ours). The FLOPs are the direct sum's, so Winograd's of_peak is an effective
// rate and may pass 1.
const ConvLayouts kBlocked{ActivationLayout::kNchw8c, ActivationLayout::kNchw8c};
void BM_Blocked3x3_Direct(benchmark::State& s) {
  run_laid_out(s, Layer{s.range(0), s.range(1), s.range(0), 3}, kBlocked, ConvAlgorithm::kDirect);
}
void BM_Blocked3x3_Winograd(benchmark::State& s) {
  run_laid_out(s, Layer{s.range(0), s.range(1), s.range(0), 3}, kBlocked, ConvAlgorithm::kWinograd);
}
void ResNet50Blocks(benchmark::internal::Benchmark* b) {
  b->Args({64, 56})->Args({128, 28})->Args({256, 14})->Args({512, 7});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}
BENCHMARK(BM_Blocked3x3_Direct)->Apply(ResNet50Blocks);
BENCHMARK(BM_Blocked3x3_Winograd)->Apply(ResNet50Blocks);

// Mobile networks' depthwise convolutions (bn and ReLU6) in each layout codegen may hand them:
// NCHW (our row loop), NHWC (16-lane channel vectors) and nChw8c (8 lanes per block, what chains
// keep on AVX2). Args: channels, plane side, kernel, stride.
void run_depthwise(benchmark::State& s, ActivationLayout layout) {
  const Layer l{s.range(0), s.range(1), s.range(0), s.range(2),
                s.range(3), s.range(0), false,      ConvActivation::kClamp};
  run_laid_out(s, l, {layout, layout}, ConvAlgorithm::kDirect);
}
void BM_Depthwise_Nchw(benchmark::State& s) { run_depthwise(s, ActivationLayout::kNchw); }
void BM_Depthwise_Nhwc(benchmark::State& s) { run_depthwise(s, ActivationLayout::kNhwc); }
void BM_Depthwise_Nchw8c(benchmark::State& s) { run_depthwise(s, ActivationLayout::kNchw8c); }
void MobileDepthwise(benchmark::internal::Benchmark* b) {
  // MobileNetV2's 144 at 56x56, its 96 at 112x112 stride 2, 384 at 14x14; a 5x5 on 480 at 14x14.
  b->Args({144, 56, 3, 1})->Args({96, 112, 3, 2})->Args({384, 14, 3, 1})->Args({480, 14, 5, 1});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
}
BENCHMARK(BM_Depthwise_Nchw)->Apply(MobileDepthwise);
BENCHMARK(BM_Depthwise_Nhwc)->Apply(MobileDepthwise);
BENCHMARK(BM_Depthwise_Nchw8c)->Apply(MobileDepthwise);

// MobileNetV2's pointwise convolutions as codegen's channels-last chains run them (oneDNN's
// brgconv_1x1 on NHWC, batch norm folded), with ReLU6 (its expands) or none (its projections): the
// gap between the two is the epilogue pass. Args: in channels, plane side, out channels, ReLU6.
void BM_Pointwise_Nhwc(benchmark::State& s) {
  const Layer l{s.range(0), s.range(1),
                s.range(2), 1,
                1,          1,
                false,      s.range(3) != 0 ? ConvActivation::kClamp : ConvActivation::kNone};
  run_laid_out(s, l, {ActivationLayout::kNhwc, ActivationLayout::kNhwc}, ConvAlgorithm::kDirect);
}
BENCHMARK(BM_Pointwise_Nhwc)
    ->ArgsProduct({{24}, {56}, {144}, {0, 1}})
    ->ArgsProduct({{144}, {56}, {24}, {0}})
    ->ArgsProduct({{64}, {28}, {384}, {0, 1}})
    ->ArgsProduct({{384}, {28}, {64}, {0}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

#define CONV_PAIR(NAME, LAYER)                                                                \
  void BM_##NAME##_Eager(benchmark::State& s) { run_eager(s, LAYER); }                        \
  void BM_##NAME##_PackedFused(benchmark::State& s) { run_packed(s, LAYER); }                 \
  BENCHMARK(BM_##NAME##_Eager)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0); \
  BENCHMARK(BM_##NAME##_PackedFused)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0)

CONV_PAIR(ConvBnRelu_ResNet50_3x3_64, k3x3);
CONV_PAIR(ConvBnAddRelu_ResNet50_3x3_64, k3x3Add);
CONV_PAIR(ConvBnRelu_ResNet50_1x1_256to64, k1x1);
CONV_PAIR(ConvBnAddRelu_ResNet50_1x1_256to64, k1x1Add);
CONV_PAIR(ConvBnRelu6_MobileNetV2_Depthwise144, kDepthwise);
CONV_PAIR(ConvBnSilu_EfficientNet_Depthwise5x5_672, kDepthwise5x5Eff);
CONV_PAIR(ConvBnSilu_EfficientNet_Depthwise3x3_480, kDepthwise3x3Eff);

}  // namespace
}  // namespace crucible::bench
