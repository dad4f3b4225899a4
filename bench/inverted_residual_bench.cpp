// MobileNetV2's inverted-residual block (1x1 expand + ReLU6, depthwise 3x3 + ReLU6, 1x1 project
// [+ the block's input]) on NHWC at batch 16, run whole or a slice of images at a time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bounds.h"
#include "crucible/ops/packed_conv.h"
#include "random_tensor.h"

namespace crucible::bench {
namespace {

constexpr int64_t kBatch = 16;
const ConvLayouts kNhwc{ActivationLayout::kNhwc, ActivationLayout::kNhwc};

ConvEpilogue bn_epilogue(int64_t channels, uint64_t seed, ConvActivation act, bool residual) {
  ConvEpilogue e;
  e.fold_batch_norm(uniform({channels}, seed, 0.5, 1.5), uniform({channels}, seed + 1, -0.2, 0.2),
                    uniform({channels}, seed + 2, -0.2, 0.2),
                    uniform({channels}, seed + 3, 0.5, 1.5), 1e-5);
  e.activation = act;
  e.residual = residual;
  return e;
}

PackedConv2d conv(int64_t c, int64_t o, int64_t k, int64_t stride, int64_t groups, const Shape& in,
                  ConvEpilogue e, uint64_t seed) {
  const double ws = 2.0 / std::sqrt(static_cast<double>(c / groups * k * k));
  const Attrs attrs{{"stride", std::vector<int64_t>{stride}},
                    {"padding", std::vector<int64_t>{k / 2}},
                    {"groups", groups}};
  return PackedConv2d(uniform({o, c / groups, k, k}, seed, -ws, ws), Tensor(), attrs, in,
                      std::move(e), kNhwc);
}

// Args: in channels, plane side, expansion, out channels, depthwise stride, images per slice.
// The expanded and depthwise activations of a slice live in buffers reused slice after slice,
// so a slice small enough for the cache never sends them to DRAM.
void BM_InvertedResidual_Nhwc(benchmark::State& s) {
  const int64_t c = s.range(0), hw = s.range(1), e = c * s.range(2), o = s.range(3);
  const int64_t stride = s.range(4), slice = s.range(5);
  const int64_t ohw = (hw - 1) / stride + 1;
  const bool residual = stride == 1 && c == o;
  const Shape in{kBatch, c, hw, hw};
  const PackedConv2d expand =
      conv(c, e, 1, 1, 1, in, bn_epilogue(e, 10, ConvActivation::kClamp, false), 1);
  const PackedConv2d dw = conv(e, e, 3, stride, e, {kBatch, e, hw, hw},
                               bn_epilogue(e, 20, ConvActivation::kClamp, false), 2);
  const PackedConv2d project = conv(e, o, 1, 1, 1, {kBatch, e, ohw, ohw},
                                    bn_epilogue(o, 30, ConvActivation::kNone, residual), 3);
  for (int64_t n = 1; n <= slice; ++n) {  // every slice size the loop below may hand them
    expand.prepare({n, c, hw, hw});
    dw.prepare({n, e, hw, hw});
    project.prepare({n, e, ohw, ohw});
  }
  const Tensor x = uniform(in, 4, -1.0, 1.0);
  Tensor y = Tensor::empty(DType::kF32, {kBatch, o, ohw, ohw});
  Tensor hidden = Tensor::empty(DType::kF32, {slice, e, hw, hw});
  Tensor depthwise = Tensor::empty(DType::kF32, {slice, e, ohw, ohw});
  const int64_t x_image = c * hw * hw, y_image = o * ohw * ohw;
  KernelTimer timer(s);
  for (auto _ : s) {
    timer.time([&] {
      for (int64_t n0 = 0; n0 < kBatch; n0 += slice) {
        const int64_t n = std::min(slice, kBatch - n0);
        const float* xs = x.data<float>() + n0 * x_image;
        float* ys = y.data<float>() + n0 * y_image;
        expand.run(xs, {n, c, hw, hw}, hidden.data<float>());
        dw.run(hidden.data<float>(), {n, e, hw, hw}, depthwise.data<float>());
        project.run(depthwise.data<float>(), {n, e, ohw, ohw}, ys, residual ? xs : nullptr);
      }
    });
    benchmark::DoNotOptimize(y.raw_data());
  }
  const double flops =
      2.0 * kBatch *
      (static_cast<double>(hw * hw) * c * e + static_cast<double>(ohw * ohw) * e * (9 + o));
  // Compulsory: the block's input read (twice with the residual) and its output written.
  timer.report(4.0 * static_cast<double>(x.numel() * (residual ? 2 : 1) + y.numel()), flops);
}
BENCHMARK(BM_InvertedResidual_Nhwc)
    ->ArgsProduct({{24}, {56}, {6}, {24}, {1}, {16, 8, 4, 2, 1}})
    ->ArgsProduct({{16}, {112}, {6}, {24}, {2}, {16, 4, 2, 1}})
    ->ArgsProduct({{64}, {14}, {6}, {64}, {1}, {16, 4, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

}  // namespace
}  // namespace crucible::bench
