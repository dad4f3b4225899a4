// Eager-kernel microbenchmarks: the elementwise add and softmax are memory-bound (reported against
// STREAM triad), matmul is compute-bound (reported against the measured FMA peak).
#include <benchmark/benchmark.h>
#include <omp.h>

#include "bounds.h"
#include "crucible/ir/op_registry.h"
#include "random_tensor.h"

namespace crucible::bench {
namespace {

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

// Mid-size outputs (128 KiB - 1 MiB): glibc serves these from mmap and trims them back, so before
// the block cache took blocks from 64 KiB every call could pay fresh page faults. 256x512 f32 is
// 512 KiB per operand; bytes: read a, read b, write out.
void BM_EagerAdd_256x512(benchmark::State& state) {
  Tensor a = randn({256, 512}, 1), b = randn({256, 512}, 2);
  std::vector<Tensor> args{a, b};
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] { benchmark::DoNotOptimize(run_op("add", args).raw_data()); });
  }
  timer.report(3.0 * a.nbytes(), 0);
}
BENCHMARK(BM_EagerAdd_256x512)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(1.0);

// The tutorial's neg_maximum_cat_f32 graph op by op, as the eager backend runs it (issue 15's
// "17x slower than PyTorch's eager"): neg of a [1,8] row, maximum against [8390,8] (268 KiB), cat
// of one tensor (a copy). Bytes the ops must move: maximum reads x2 and writes b, cat reads b
// and writes y.
void BM_EagerNegMaximumCat_8390x8(benchmark::State& state) {
  Tensor x1 = randn({1, 8}, 1), x2 = randn({8390, 8}, 2);
  KernelTimer timer(state);
  for (auto _ : state) {
    timer.time([&] {
      Tensor a = run_op("neg", std::vector<Tensor>{x1});
      Tensor b = run_op("maximum", std::vector<Tensor>{x2, a});
      benchmark::DoNotOptimize(
          run_op("cat", std::vector<Tensor>{b}, {{"dim", int64_t{0}}}).raw_data());
    });
  }
  timer.report(4.0 * x2.nbytes(), 0);
}
BENCHMARK(BM_EagerNegMaximumCat_8390x8)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);

}  // namespace
}  // namespace crucible::bench
