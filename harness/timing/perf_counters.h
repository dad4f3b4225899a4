// Hardware and software counters of the worker process and every thread it starts afterwards
// (perf_event_open, user space only): instructions, cycles and page faults per timed sample.
#pragma once

#include <string>

namespace crucible {

class PerfCounters {
 public:
  struct Reading {
    double instructions, cycles, page_faults;  // NaN for a counter the kernel refused
  };

  // Opens the counters; threads created before this call are not counted, so open it before
  // loading any backend.
  PerfCounters();
  ~PerfCounters();
  PerfCounters(const PerfCounters&) = delete;
  PerfCounters& operator=(const PerfCounters&) = delete;

  Reading read() const;
  // "instructions, cycles: <why>" for the counters the kernel refused; "" when all are counted.
  const std::string& unavailable() const { return unavailable_; }

 private:
  int fds_[3];
  std::string unavailable_;
};

}  // namespace crucible
