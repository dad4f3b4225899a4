// Measuring the OpenMP pool's spin after a region in the harness's process (see pool_spin.h).
#include "pool_spin.h"

#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "worker_cpu.h"

namespace crucible {
namespace {

// A pool thread of this process: the ms it has run (0 when unreadable), whether it is runnable.
std::pair<double, bool> thread_now(long tid) {
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  const double ms = thread_run_ms(task + "/schedstat");
  return {std::isfinite(ms) ? ms : 0, thread_runnable(task + "/stat")};
}

double measure(int threads) {
  std::vector<long> tids(static_cast<size_t>(threads), 0);
  // A region of the workers' size, so that the pool's threads exist and then wait for the next.
#pragma omp parallel num_threads(threads)
  tids[static_cast<size_t>(omp_get_thread_num())] = ::syscall(SYS_gettid);
  const long self = ::syscall(SYS_gettid);
  std::vector<double> start;
  for (long tid : tids) start.push_back(tid == self ? 0 : thread_now(tid).first);
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
      const auto [ms, now_runnable] = thread_now(tids[k]);
      used += ms - start[k];
      runnable = runnable || now_runnable;
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
