// Measuring the OpenMP pool's spin after a region in the harness's process (see pool_spin.h).
#include "pool_spin.h"

#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace crucible {
namespace {

// A thread of this process: its run time in ms (schedstat's first field) and whether it is
// runnable (stat's state).
struct ThreadNow {
  double ms = 0;
  bool runnable = false;
};

ThreadNow thread_now(long tid) {
  ThreadNow t;
  std::ifstream sched("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  double ns = 0;
  if (sched >> ns) t.ms = ns / 1e6;
  std::ifstream stat_file("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(stat_file)),
                         std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  t.runnable = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'R';
  return t;
}

double measure(int threads) {
  std::vector<long> tids(static_cast<size_t>(threads), 0);
  // A region of the workers' size, so that the pool's threads exist and then wait for the next.
#pragma omp parallel num_threads(threads)
  tids[static_cast<size_t>(omp_get_thread_num())] = ::syscall(SYS_gettid);
  const long self = ::syscall(SYS_gettid);
  std::vector<double> start;
  for (long tid : tids) start.push_back(tid == self ? 0 : thread_now(tid).ms);
  // Settled as turn_driver.cpp's settle(): two polls in a row with no pool thread runnable and
  // no CPU moved.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kMaxPoolSpinWallMs);
  double used = 0, before = -1;
  for (int quiet = 0; quiet < 2 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::microseconds(250));
    used = 0;
    bool runnable = false;
    for (size_t k = 0; k < tids.size(); ++k) {
      if (tids[k] == self || tids[k] == 0) continue;
      const ThreadNow t = thread_now(tids[k]);
      used += t.ms - start[k];
      runnable = runnable || t.runnable;
    }
    quiet = !runnable && used == before ? quiet + 1 : 0;
    before = used;
  }
  return used;
}

}  // namespace

double pool_spin_cpu_ms(int threads) {
  static std::mutex mutex;
  static std::map<int, double> measured;
  const std::lock_guard<std::mutex> lock(mutex);
  if (threads <= 0) threads = omp_get_max_threads();  // as the worker reads 0 (worker.cpp)
  const auto [at, fresh] = measured.try_emplace(threads, 0.0);
  if (fresh && threads > 1) at->second = measure(threads);
  return at->second;
}

}  // namespace crucible
