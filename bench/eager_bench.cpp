// Eager-kernel microbenchmarks: the elementwise add and softmax are memory-bound (reported against
// STREAM triad), matmul is compute-bound (reported against the measured FMA peak).
#include <benchmark/benchmark.h>
#include <omp.h>

#include "bounds.h"
#include "crucible/core/rng.h"
#include "crucible/ir/op_registry.h"

namespace crucible::bench {
namespace {

Tensor randn(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  fill_randn(t, seed, 0.0, 1.0);
  return t;
}

// Eager add as the eager backend runs it: a fresh output per call. Bytes: read a, read b, write
// out.
void BM_EagerAdd_16384x512(benchmark::State& state) {
  Tensor a = randn({16384, 512}, 1), b = randn({16384, 512}, 2);
  std::vector<Tensor> args{a, b};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("add", args).raw_data()); });
  }
  timer.report(3.0 * a.nbytes(), 0);
}
BENCHMARK(BM_EagerAdd_16384x512)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// The same add with a [1,512] row broadcast over 16384 rows: reads a and the row, writes out.
void BM_EagerAddBroadcastRow_16384x512(benchmark::State& state) {
  Tensor a = randn({16384, 512}, 1), row = randn({1, 512}, 2);
  std::vector<Tensor> args{a, row};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("add", args).raw_data()); });
  }
  timer.report(2.0 * a.nbytes(), 0);
}
BENCHMARK(BM_EagerAddBroadcastRow_16384x512)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// Softmax over the last dim of 8192x1024: must read x once and write y once (rows fit in L1/L2).
void BM_EagerSoftmax_8192x1024(benchmark::State& state) {
  Tensor x = randn({8192, 1024}, 3);
  std::vector<Tensor> args{x};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      benchmark::DoNotOptimize(run_op("softmax", args, {{"dim", int64_t{-1}}}).raw_data());
    });
  }
  timer.report(2.0 * x.nbytes(), 0);
}
BENCHMARK(BM_EagerSoftmax_8192x1024)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// matmul 1024^3 f32 through oneDNN: 2*M*N*K FLOPs.
void BM_EagerMatmul_1024(benchmark::State& state) {
  Tensor a = randn({1024, 1024}, 4), b = randn({1024, 1024}, 5);
  std::vector<Tensor> args{a, b};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("matmul", args).raw_data()); });
  }
  timer.report(0, 2.0 * 1024 * 1024 * 1024);
}
BENCHMARK(BM_EagerMatmul_1024)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace crucible::bench
