// Linear 512->512 + bias + ReLU on 16384 rows, eager (linear op, then relu op) against PackedLinear
// with the fused epilogue, side by side; and eager's 64x128x128 batched matmul, for reference.
#include <benchmark/benchmark.h>

#include "bounds.h"
#include "crucible/core/rng.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ops/packed_linear.h"

namespace crucible::bench {
namespace {

constexpr int64_t kRows = 16384, kFeatures = 512;

Tensor randn(Shape shape, uint64_t seed, double std = 1.0) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_randn(t, seed, 0.0, std);
  return t;
}

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

}  // namespace
}  // namespace crucible::bench
