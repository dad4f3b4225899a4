// Physical bounds measured in the same benchmark binary: STREAM-triad bandwidth and peak FMA
// throughput. Kernel benchmarks report their figures as fractions of these.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

namespace crucible::bench {

// Best triad bandwidth (bytes/s) and FMA peak (FLOP/s) seen so far; 0 until those benchmarks ran.
double triad_bytes_per_second();
double peak_flops();

// Reads a 256 MiB buffer (several times the last-level cache a VM's cores share) so that what
// runs next finds its data in DRAM, as STREAM's triad does.
void evict_caches();
// The same on this thread alone: for a benchmark of code that starts threads of its own, which
// OpenMP's workers, spinning for milliseconds after evict_caches' loop, would slow.
void evict_caches_one_thread();

// Times each iteration of a kernel benchmark (manual time) and, at the end, reports the median
// time's throughput beside its bound: "GB/s" and "of_triad" for `bytes` per iteration, "GFLOP/s"
// and "of_peak" for `flops` per iteration (either may be 0).
class KernelTimer {
 public:
  explicit KernelTimer(benchmark::State& state) : state_(state) {}
  template <typename F>
  void time(F&& body) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    samples_.push_back(s);
    state_.SetIterationTime(s);
  }
  void report(double bytes_per_iter, double flops_per_iter);

 private:
  benchmark::State& state_;
  std::vector<double> samples_;
};

}  // namespace crucible::bench
