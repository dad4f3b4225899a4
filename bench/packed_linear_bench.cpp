// Linear 512->512 + bias + ReLU on 16384 rows, eager (linear op, then relu op) against PackedLinear
// with the fused epilogue, side by side; and eager's 64x128x128 batched matmul, for reference.
#include <benchmark/benchmark.h>

#include <array>

#include "bounds.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ops/packed_linear.h"
#include "random_tensor.h"

namespace crucible::bench {
namespace {

constexpr int64_t kRows = 16384, kFeatures = 512;

// The same operands for both sides; weights with std 1/sqrt(K) keep outputs O(1).
struct LinearOperands {
  Tensor x = randn({kRows, kFeatures}, 11);
  Tensor w = randn({kFeatures, kFeatures}, 12, 0.044);
  Tensor b = randn({kFeatures}, 13);
};

constexpr double kLinearFlops = 2.0 * kRows * kFeatures * kFeatures;

// As the eager backend runs the graph: linear (bias added by the GEMM's beta = 1 over a copied
// bias), then relu in a second pass, each producing a fresh output tensor.
void BM_Linear512_Eager(benchmark::State& state) {
  LinearOperands op;
  std::vector<Tensor> args{op.x, op.w, op.b};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      Tensor h = run_op("linear", args);
      std::vector<Tensor> relu_args{h};
      benchmark::DoNotOptimize(run_op("relu", relu_args).raw_data());
    });
  }
  timer.report(0, kLinearFlops);
}
BENCHMARK(BM_Linear512_Eager)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// What codegen's extern call does: weights packed once (outside the timed loop, at compile time),
// then one GEMM with bias and ReLU fused. The output is a fresh tensor per call, as a graph output
// would be, so allocation costs are charged to both sides alike.
void BM_Linear512_PackedFused(benchmark::State& state) {
  LinearOperands op;
  const PackedLinear linear(op.w, true, op.b, Epilogue::kRelu);
  state.SetLabel(linear.describe());
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      Tensor y = Tensor::empty(DType::kF32, {kRows, kFeatures});
      linear.run(op.x.data<float>(), kRows, kFeatures, y.data<float>(), kFeatures);
      benchmark::DoNotOptimize(y.raw_data());
    });
  }
  timer.report(0, kLinearFlops);
}
BENCHMARK(BM_Linear512_PackedFused)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// 64 independent 128x128x128 products through the eager matmul op.
void BM_BatchedMatmul_64x128x128_Eager(benchmark::State& state) {
  Tensor a = randn({64, 128, 128}, 14), b = randn({64, 128, 128}, 15);
  std::vector<Tensor> args{a, b};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("matmul", args).raw_data()); });
  }
  timer.report(0, 2.0 * 64 * 128 * 128 * 128);
}
BENCHMARK(BM_BatchedMatmul_64x128x128_Eager)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// Small linears (the tutorial's 10x10, a few transformer-tail sizes), eager's linear op against
// PackedLinear, so the crossover where oneDNN's threads start to pay shows in one run. Args: M, K,
// N.
void BM_SmallLinear_Eager(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  std::vector<Tensor> args{randn({m, k}, 21), randn({n, k}, 22, 0.1), randn({n}, 23)};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("linear", args).raw_data()); });
  }
  timer.report(0, 2.0 * m * k * n);
}

void BM_SmallLinear_Packed(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor x = randn({m, k}, 21);
  const PackedLinear linear(randn({n, k}, 22, 0.1), true, randn({n}, 23), Epilogue::kNone, 1.0f,
                            1.0f, m);
  state.SetLabel(linear.describe());
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      Tensor y = Tensor::empty(DType::kF32, {m, n});
      linear.run(x.data<float>(), m, k, y.data<float>(), n);
      benchmark::DoNotOptimize(y.raw_data());
    });
  }
  timer.report(0, 2.0 * m * k * n);
}

void small_linear_shapes(benchmark::internal::Benchmark* b) {
  for (auto [m, k, n] : {std::array<int64_t, 3>{10, 10, 10},
                         {1, 256, 256},
                         {16, 64, 64},
                         {32, 128, 128},
                         {64, 128, 128},
                         {128, 256, 256},
                         {256, 256, 256}}) {
    b->Args({m, k, n});
  }
}
BENCHMARK(BM_SmallLinear_Eager)
    ->Apply(small_linear_shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK(BM_SmallLinear_Packed)
    ->Apply(small_linear_shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace crucible::bench
