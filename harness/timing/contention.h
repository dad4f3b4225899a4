// Measures how much the rest of the machine disturbed the worker while it timed: its threads'
// wait for a CPU, other processes' CPU time, steal time, involuntary context switches.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "crucible/reports/records.h"

namespace crucible {

// The counters contention is computed from, at one instant.
struct ContentionSnapshot {
  std::chrono::steady_clock::time_point at;
  double self_cpu_s = 0;   // this process, all threads (getrusage)
  double run_delay_s = 0;  // this process's threads: time runnable but not running (schedstat)
  int64_t involuntary_switches = 0;
  double busy_s = 0;   // every CPU's non-idle time (/proc/stat, 1/USER_HZ resolution)
  double steal_s = 0;  // every CPU's steal time
  // The parent's main thread (schedstat): under --turns it writes the sample's inputs between the
  // worker's readings and its "go", and is no other process's contention.
  double parent_cpu_s = 0;
};
ContentionSnapshot take_contention_snapshot();

// Sums intervals (one per timed sample) of the worker's own figures, which are precise to the
// nanosecond, and keeps the machine-wide ones (tick-resolution) over one contiguous window.
class ContentionMeter {
 public:
  void add_sample(const ContentionSnapshot& before, const ContentionSnapshot& after);
  void set_window(const ContentionSnapshot& begin, const ContentionSnapshot& end);
  reports::Contention figures(int cores) const;
  double window_s() const { return samples_only_ ? sample_s_ : window_s_; }
  // Other processes' CPU and steal over the samples only, not the whole window: a timing worker
  // that takes turns shares its window with the other backends' workers, timed by design.
  void count_samples_only() { samples_only_ = true; }

 private:
  bool samples_only_ = false;
  double sample_s_ = 0, run_delay_s_ = 0, sample_other_s_ = 0, sample_steal_s_ = 0;
  int64_t switches_ = 0;
  double window_s_ = 0, window_other_s_ = 0, window_steal_s_ = 0;
};

// The caches private to the cores, all cores together, in MB (L2 per core x online cores; 1 MB per
// core when the system does not say). The shared L3 is left out: a VM reports the host's whole L3.
double private_cache_mb();

// A backend's threads may burn this share of its own timed time (at least kOutsideCpuMinMs) outside
// its own calls, or during another backend's samples, before it counts as work outside the clock:
// thread pools spin briefly after a call returns. The timing worker holds its own threads to it,
// the parent each worker's process tree (turn_driver.cpp).
inline constexpr double kOutsideCpuShare = 0.05;
inline constexpr double kOutsideCpuMinMs = 2.0;

// Thresholds past which a result is marked noisy.
struct NoiseThresholds {
  // Quiet, this VM's workers wait up to 10% (OpenMP wake-ups); beside a CPU hog, 25-150%.
  double run_delay = 0.15;      // 15% of sample time spent waiting for a CPU
  double other_cpu = 0.15;      // other processes used 15% of the cores...
  double min_window_s = 0.5;    // ...measured over at least this long (ticks are 10 ms)
  double steal = 0.05;          // 5% of the cores stolen by the hypervisor
  double canary_change = 1.25;  // the canary after / before timing, or before / after
  // Memory bandwidth after / before timing, or before / after. Quiet, this VM's triad moves up to
  // 9% between the two, at times 50% (48 -> 72 GB/s); a memory-bound graph's time follows it.
  double triad_change = 1.15;
  // ...judged only for graphs whose working set exceeds this: one that fits in the cores' private
  // caches does not see DRAM's bandwidth (a 10x10 linear was flagged for a 15% drift it never saw).
  double memory_bound_mb = private_cache_mb();
};
// "" when quiet; otherwise which figures passed their threshold, e.g. "run delay 31% > 5%".
std::string noise_reason(const reports::Contention& c, double window_s,
                         const NoiseThresholds& t = {});

// Milliseconds of a fixed single-threaded reference loop (a dependent integer chain that neither
// memory nor frequency boosts change much): timed before each run and around each timing job.
double noise_canary_ms();

// The memory side of the canary: STREAM-triad bandwidth (a[i] = b[i] + s * c[i] over three 32 MiB
// arrays, on the worker's OpenMP threads, best of 4 passes), in GB/s. A memory-bound graph's time
// follows it, and on a shared host it drifts from minute to minute while the CPU canary does not.
double memory_canary_gbs();

}  // namespace crucible
