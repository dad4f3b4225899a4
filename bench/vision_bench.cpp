// Eager vision kernels against the machine's bounds: conv2d (a ResNet-50 3x3 layer and a
// MobileNetV2 depthwise 3x3) and conv_transpose2d (input gradients) as GFLOP/s and fraction of
// FMA peak; batch_norm, max pooling and
// hardswish as fraction of triad.
#include <benchmark/benchmark.h>

#include "bounds.h"
#include "crucible/ir/op_registry.h"
#include "random_tensor.h"

namespace crucible::bench {
namespace {

// One `op` call (conv2d, conv_transpose2d) as the eager backend makes it: plain NCHW in, a fresh
// NCHW output out. `bytes` counts the input read and the output written once (what a depthwise
// layer must move).
void run_conv(benchmark::State& state, Shape x_shape, Shape w_shape, Attrs attrs, double flops,
              const char* op = "conv2d") {
  const Tensor x = randn(x_shape, 1), w = randn(w_shape, 2, 0.05);
  const std::vector<Tensor> args{x, w};
  const Tensor probe = run_op(op, args, attrs);  // plans built outside the timed loop
  const double bytes = static_cast<double>(x.nbytes() + probe.nbytes());
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op(op, args, attrs).raw_data()); });
  }
  timer.report(bytes, flops);
}

// ResNet-50's conv2_x 3x3: batch 8, 64 -> 64 channels at 56x56, padding 1.
void BM_Conv2d_ResNet50_3x3_64_Eager(benchmark::State& state) {
  run_conv(state, {8, 64, 56, 56}, {64, 64, 3, 3}, {{"padding", std::vector<int64_t>{1, 1}}},
           2.0 * 8 * 64 * 56 * 56 * 64 * 9);
}
BENCHMARK(BM_Conv2d_ResNet50_3x3_64_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// The same layer's input gradient in a training step: conv_transpose2d of the output gradient
// by the layer's weight (the same FLOPs).
void BM_ConvTranspose2d_ResNet50_3x3_64_InputGrad_Eager(benchmark::State& state) {
  run_conv(state, {8, 64, 56, 56}, {64, 64, 3, 3}, {{"padding", std::vector<int64_t>{1, 1}}},
           2.0 * 8 * 64 * 56 * 56 * 64 * 9, "conv_transpose2d");
}
BENCHMARK(BM_ConvTranspose2d_ResNet50_3x3_64_InputGrad_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// A downsampling 3x3's (stride 2, 64 -> 128 at 56x56) input gradient: 28x28 back to 56x56,
// output padding 1.
void BM_ConvTranspose2d_ResNet_3x3s2_InputGrad_Eager(benchmark::State& state) {
  run_conv(state, {8, 128, 28, 28}, {128, 64, 3, 3},
           {{"padding", std::vector<int64_t>{1, 1}},
            {"stride", std::vector<int64_t>{2, 2}},
            {"output_padding", std::vector<int64_t>{1, 1}}},
           2.0 * 8 * 128 * 28 * 28 * 64 * 9, "conv_transpose2d");
}
BENCHMARK(BM_ConvTranspose2d_ResNet_3x3s2_InputGrad_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// MobileNetV2's depthwise 3x3 on 144 channels at 56x56 (block 3), batch 8: memory-bound, so its
// of_triad says more than its of_peak.
void BM_Conv2d_MobileNetV2_Depthwise144_Eager(benchmark::State& state) {
  run_conv(state, {8, 144, 56, 56}, {144, 1, 3, 3},
           {{"padding", std::vector<int64_t>{1, 1}}, {"groups", int64_t{144}}},
           2.0 * 8 * 144 * 56 * 56 * 9);
}
BENCHMARK(BM_Conv2d_MobileNetV2_Depthwise144_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// Inference batch_norm over ResNet's [64, 256, 56, 56] f32 activation (196 MiB, far beyond the
// caches): one read, one write.
void BM_BatchNorm_F32_Eager(benchmark::State& state) {
  const int64_t c = 256;
  const Tensor x = randn({64, c, 56, 56}, 3);
  Tensor var = Tensor::empty(DType::kF32, {c});
  fill_uniform(var, 7, 0.5, 1.5);
  const std::vector<Tensor> args{x, randn({c}, 4), randn({c}, 5), randn({c}, 6), var};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("batch_norm", args).raw_data()); });
  }
  timer.report(2.0 * static_cast<double>(x.nbytes()), 0);
}
BENCHMARK(BM_BatchNorm_F32_Eager)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// ResNet's stem max pool (3x3, stride 2, padding 1) on [32, 64, 112, 112]: reads the input once
// (overlapping windows hit the caches), writes a quarter of it.
void BM_MaxPool2d_ResNetStem_F32_Eager(benchmark::State& state) {
  const std::vector<Tensor> args{randn({32, 64, 112, 112}, 9)};
  const Attrs attrs{{"kernel_size", std::vector<int64_t>{3, 3}},
                    {"stride", std::vector<int64_t>{2, 2}},
                    {"padding", std::vector<int64_t>{1, 1}}};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("max_pool2d", args, attrs).raw_data()); });
  }
  timer.report(1.25 * static_cast<double>(args[0].nbytes()), 0);
}
BENCHMARK(BM_MaxPool2d_ResNetStem_F32_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// hardswish (MobileNetV3's activation) over the same tensor, for the activations' streaming rate.
void BM_Hardswish_F32_Eager(benchmark::State& state) {
  const std::vector<Tensor> args{randn({64, 256, 56, 56}, 8)};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("hardswish", args).raw_data()); });
  }
  timer.report(2.0 * static_cast<double>(args[0].nbytes()), 0);
}
BENCHMARK(BM_Hardswish_F32_Eager)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace crucible::bench
