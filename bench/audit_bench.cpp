// What the timing audit costs per call: making a call's own inputs (a rotated copy of set B, so one
// read and one write of each byte) and digesting outputs (the check phase's), against the
// STREAM-triad bandwidth measured in the same binary.
#include <benchmark/benchmark.h>

#include "bounds.h"
#include "call_input_region.h"
#include "crucible/core/tensor.h"
#include "input_sets.h"
#include "output_digest.h"

namespace {

using namespace crucible;

// The tutorial's add_add_mul_add output, 16384 x 512 f32 (32 MiB), evicted from the caches
// before each digest as a timed call's outputs would largely be; and a 4 MiB one.
void BM_DigestOutput(benchmark::State& state) {
  const int64_t rows = state.range(0);
  Tensor t = Tensor::zeros(DType::kF32, {rows, 512});
  auto* p = static_cast<float*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i % 977) * 0.5f;
  bench::KernelTimer timer(state);
  for (auto _ : state) {
    bench::evict_caches();
    timer.time([&] { benchmark::DoNotOptimize(digest(t)); });
  }
  timer.report(static_cast<double>(t.nbytes()), 0);
}
BENCHMARK(BM_DigestOutput)->Arg(16384)->Arg(2048)->UseManualTime()->Unit(benchmark::kMillisecond);

// One call's inputs made from set B: the tutorial's add_add_mul_add (two f32 inputs of 8 Mi
// elements, 64 MiB) and a 4 MiB set, from evicted caches, as before a sample. Bytes that must
// move: each input read once and written once. Second argument 0: one thread with cached stores
// (fill_call_inputs, as a worker timing alone does); 1: the parent's way into the worker's region
// (CallInputRegion::write: threads, and stores past the caches for a block larger than the L3).
void BM_CallInputs(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Tensor> set_b;
  for (int k = 0; k < 2; ++k) {
    Tensor t = Tensor::zeros(DType::kF32, {n});
    auto* p = static_cast<float*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * (k + 3)) % 977) * 0.5f;
    set_b.push_back(t);
  }
  std::vector<Tensor> into;
  CallInputRegion region(set_b);
  uint64_t call = 0;
  bench::KernelTimer timer(state);
  for (auto _ : state) {
    bench::evict_caches_one_thread();
    if (state.range(1) == 0) {
      timer.time([&] { fill_call_inputs(set_b, 7, call++, into); });
    } else {
      timer.time([&] { region.write(7, static_cast<int64_t>(call++), 1); });
    }
  }
  double bytes = 0;
  for (const Tensor& t : set_b) bytes += 2.0 * static_cast<double>(t.nbytes());
  timer.report(bytes, 0);
}
BENCHMARK(BM_CallInputs)
    ->Args({1 << 23, 0})
    ->Args({1 << 23, 1})
    ->Args({1 << 19, 0})
    ->Args({1 << 19, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
