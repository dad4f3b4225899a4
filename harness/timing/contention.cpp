// Contention figures from getrusage, /proc/self/task/*/schedstat and /proc/stat.
#include "contention.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "stream_triad.h"

namespace crucible {

namespace {

double to_s(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; }

// Sum over this process's threads of the second schedstat field (ns spent waiting on a run
// queue). Threads that already exited are not counted; the pool threads that matter live on.
double run_delay_s() {
  double total = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t run_ns = 0, wait_ns = 0;
    if (in >> run_ns >> wait_ns) total += 1e-9 * static_cast<double>(wait_ns);
  }
  return total;
}

// CPU seconds of this process's parent's main thread (the first schedstat field): the harness,
// which writes a timing worker's inputs while it waits for "go" (turns/call_input_region.h).
double parent_cpu_s() {
  std::ifstream in(fmt::format("/proc/{}/schedstat", getppid()));
  uint64_t run_ns = 0;
  return in >> run_ns ? 1e-9 * static_cast<double>(run_ns) : 0.0;
}

void read_proc_stat(double& busy_s, double& steal_s) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal)) return;
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  busy_s = tick * static_cast<double>(user + nice + system + irq + softirq);
  steal_s = tick * static_cast<double>(steal);
}

}  // namespace

ContentionSnapshot take_contention_snapshot() {
  ContentionSnapshot s;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  s.self_cpu_s = to_s(u.ru_utime) + to_s(u.ru_stime);
  s.involuntary_switches = u.ru_nivcsw;
  s.run_delay_s = run_delay_s();
  s.parent_cpu_s = parent_cpu_s();
  read_proc_stat(s.busy_s, s.steal_s);
  s.at = std::chrono::steady_clock::now();
  return s;
}

void ContentionMeter::add_sample(const ContentionSnapshot& before,
                                 const ContentionSnapshot& after) {
  sample_s_ += std::chrono::duration<double>(after.at - before.at).count();
  run_delay_s_ += std::max(0.0, after.run_delay_s - before.run_delay_s);
  switches_ += std::max<int64_t>(0, after.involuntary_switches - before.involuntary_switches);
  sample_other_s_ += (after.busy_s - before.busy_s) - (after.self_cpu_s - before.self_cpu_s) -
                     (after.parent_cpu_s - before.parent_cpu_s);
  sample_steal_s_ += after.steal_s - before.steal_s;
}

void ContentionMeter::set_window(const ContentionSnapshot& begin, const ContentionSnapshot& end) {
  window_s_ = std::chrono::duration<double>(end.at - begin.at).count();
  const double busy = end.busy_s - begin.busy_s;
  const double self = end.self_cpu_s - begin.self_cpu_s;
  window_other_s_ = std::max(0.0, busy - self);
  window_steal_s_ = std::max(0.0, end.steal_s - begin.steal_s);
}

reports::Contention ContentionMeter::figures(int cores) const {
  reports::Contention c;
  c.run_delay = sample_s_ > 0 ? run_delay_s_ / sample_s_ : 0;
  c.involuntary_switches = switches_;
  const double capacity = window_s() * std::max(1, cores);
  const double other = samples_only_ ? sample_other_s_ : window_other_s_;
  const double steal = samples_only_ ? sample_steal_s_ : window_steal_s_;
  c.other_cpu = capacity > 0 ? std::max(0.0, other) / capacity : 0;
  c.steal = capacity > 0 ? std::max(0.0, steal) / capacity : 0;
  return c;
}

double private_cache_mb() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return (l2 > 0 ? static_cast<double>(l2) / 1e6 : 1.0) * static_cast<double>(std::max(1L, cores));
}

std::string noise_reason(const reports::Contention& c, double window_s, const NoiseThresholds& t) {
  std::vector<std::string> why;
  auto pct = [](double v) { return fmt::format("{:.0f}%", 100 * v); };
  if (c.run_delay > t.run_delay)
    why.push_back(fmt::format("run delay {} > {}", pct(c.run_delay), pct(t.run_delay)));
  if (window_s >= t.min_window_s && c.other_cpu > t.other_cpu)
    why.push_back(fmt::format("other processes' CPU {} > {}", pct(c.other_cpu), pct(t.other_cpu)));
  if (c.steal > t.steal) why.push_back(fmt::format("steal {} > {}", pct(c.steal), pct(t.steal)));
  const double tlo = std::min(c.triad_before_gbs, c.triad_after_gbs);
  const double thi = std::max(c.triad_before_gbs, c.triad_after_gbs);
  if (c.working_set_mb > t.memory_bound_mb && tlo > 0 && thi > t.triad_change * tlo) {
    why.push_back(fmt::format("memory bandwidth {:.1f} GB/s before, {:.1f} GB/s after",
                              c.triad_before_gbs, c.triad_after_gbs));
  }
  const double lo = std::min(c.canary_before_ms, c.canary_after_ms);
  const double hi = std::max(c.canary_before_ms, c.canary_after_ms);
  if (lo > 0 && hi > t.canary_change * lo) {
    why.push_back(fmt::format("canary {:.1f} ms before, {:.1f} ms after", c.canary_before_ms,
                              c.canary_after_ms));
  }
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

double noise_canary_ms() {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 20'000'000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  volatile uint64_t sink = x;
  (void)sink;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double memory_canary_gbs() {
  constexpr int64_t kN = int64_t{32} << 20 >> 3;  // doubles per 32 MiB array
  std::vector<double> a(kN), b(kN, 1.0), c(kN, 2.0);
  double best_s = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < 4; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    stream_triad(a.data(), b.data(), c.data(), 3.0, kN);
    best_s = std::min(best_s,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile double sink = a[kN / 2];
  (void)sink;
  return stream_triad_bytes<double>(kN) / best_s / 1e9;
}

}  // namespace crucible
