// STREAM triad and FMA-peak benchmarks, and the counters that relate other benchmarks to them.
// Registered first (this file's benchmarks run before the others) so the bounds are known in time.
#include "bounds.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "crucible/reports/records.h"
#include "machine_peaks.h"
#include "stream_triad.h"

namespace crucible::bench {

namespace {
double g_triad = 0;
double g_peak = 0;

// STREAM's triad a = b + s*c over arrays far larger than the caches (3 x 128 MiB of doubles),
// counted as STREAM does: 3 arrays x 8 bytes per element, no write-allocate traffic.
void BM_StreamTriad(benchmark::State& state) {
  const int64_t n = 16 << 20;
  auto alloc = [&] { return static_cast<double*>(std::aligned_alloc(64, n * sizeof(double))); };
  double *a = alloc(), *b = alloc(), *c = alloc();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  const double s = 3.0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    stream_triad(a, b, c, s, n);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(a);
    benchmark::ClobberMemory();
    g_triad = std::max(g_triad, stream_triad_bytes<double>(n) / secs);  // STREAM's best pass
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * static_cast<int64_t>(sizeof(double)));
  state.counters["best_GB/s"] = g_triad / 1e9;
  state.counters["threads"] = omp_get_max_threads();
  std::free(a);
  std::free(b);
  std::free(c);
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// Peak single-precision FMA throughput, as the timing worker measures it for the roofline.
void BM_PeakFmaF32(benchmark::State& state) {
  for (auto _ : state) g_peak = std::max(g_peak, fma_pass_flops(long{1} << 22));
  state.counters["best_GFLOP/s"] = g_peak / 1e9;
}
BENCHMARK(BM_PeakFmaF32)->Unit(benchmark::kMillisecond)->UseRealTime();
}  // namespace

void evict_caches() {
  static const std::vector<int64_t> scrub(int64_t{256} << 17, 1);  // 256 MiB
  int64_t sum = 0;
  const int64_t n = static_cast<int64_t>(scrub.size());
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t i = 0; i < n; i += 8) sum += scrub[i];  // one load per 64-byte line
  benchmark::DoNotOptimize(sum);
}

void evict_caches_one_thread() {
  static const std::vector<int64_t> scrub(int64_t{256} << 17, 1);
  int64_t sum = 0;
  for (size_t i = 0; i < scrub.size(); i += 8) sum += scrub[i];
  benchmark::DoNotOptimize(sum);
}

double triad_bytes_per_second() { return g_triad; }
double peak_flops() { return g_peak; }

void KernelTimer::report(double bytes_per_iter, double flops_per_iter) {
  if (samples_.empty()) return;
  const double median = reports::median(samples_);
  state_.counters["median_ms"] = median * 1e3;
  if (bytes_per_iter > 0) {
    state_.counters["MiB_moved"] = bytes_per_iter / (1 << 20);
    state_.counters["GB/s"] = bytes_per_iter / median / 1e9;
    if (g_triad > 0) state_.counters["of_triad"] = bytes_per_iter / median / g_triad;
  }
  if (flops_per_iter > 0) {
    state_.counters["GFLOP/s"] = flops_per_iter / median / 1e9;
    if (g_peak > 0) state_.counters["of_peak"] = flops_per_iter / median / g_peak;
  }
}

}  // namespace crucible::bench
