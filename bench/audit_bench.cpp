// What the timing audit costs per call: digesting a call's outputs, against the STREAM-triad
// bandwidth measured in the same binary (the digest reads each output byte once).
#include <benchmark/benchmark.h>

#include "bounds.h"
#include "crucible/core/tensor.h"
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

}  // namespace
