// perf_event_open with inherit=1: reading a counter sums the process and its threads, live ones
// included. exclude_kernel keeps it usable at perf_event_paranoid 2 (Debian's default).
#include "perf_counters.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>

namespace crucible {

namespace {

int open_counter(uint32_t type, uint64_t config) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = type;
  a.config = config;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.inherit = 1;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
}

// A counter's value, scaled up when the kernel multiplexed it; NaN when it is not open.
double read_counter(int fd) {
  if (fd < 0) return NAN;
  uint64_t v[3] = {0, 0, 0};
  if (::read(fd, v, sizeof v) != static_cast<ssize_t>(sizeof v)) return NAN;
  if (v[2] == 0) return v[1] == 0 ? static_cast<double>(v[0]) : NAN;
  return static_cast<double>(v[0]) * static_cast<double>(v[1]) / static_cast<double>(v[2]);
}

}  // namespace

PerfCounters::PerfCounters() {
  const struct {
    const char* name;
    uint32_t type;
    uint64_t config;
  } kCounters[3] = {{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
                    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
                    {"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS}};
  std::map<std::string, std::string> refused;  // reason -> counters
  for (int i = 0; i < 3; ++i) {
    fds_[i] = open_counter(kCounters[i].type, kCounters[i].config);
    if (fds_[i] >= 0) continue;
    std::string why = std::strerror(errno);
    if (errno == ENOENT) why += " (no CPU performance-monitoring unit is exposed, as in many VMs)";
    if (errno == EACCES || errno == EPERM) why += " (see /proc/sys/kernel/perf_event_paranoid)";
    auto& names = refused[why];
    names += (names.empty() ? "" : ", ") + std::string(kCounters[i].name);
  }
  for (const auto& [why, names] : refused)
    unavailable_ += (unavailable_.empty() ? "" : "; ") + names + ": perf_event_open: " + why;
}

PerfCounters::~PerfCounters() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

PerfCounters::Reading PerfCounters::read() const {
  return {read_counter(fds_[0]), read_counter(fds_[1]), read_counter(fds_[2])};
}

}  // namespace crucible
