// What backends do in the timing worker besides answering run(): which threads each started and
// the CPU they burn while others are timed, and what a call leaves behind (signal handlers,
// userfaultfd descriptors, child processes), so work moved outside the clock has evidence.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace crucible {

class ProcessWatch {
 public:
  // The threads alive now (the harness's own and OpenMP's pool, which every backend shares) and
  // the signal handlers installed now belong to no backend.
  ProcessWatch();

  // Reads every thread's CPU clock. A thread not seen before is attributed to `active`, the
  // backend whose code ran since the previous read (its own threads start there). Returns the CPU
  // milliseconds each backend's threads used since the previous read (owners with none left out).
  std::map<std::string, double> read(const std::string& active);

  // The threads attributed to `owner` that are alive now.
  std::vector<pid_t> threads_of(const std::string& owner) const;

  // What changed in the process since the previous call that no harness code does: signal
  // handlers installed or replaced, userfaultfd descriptors open, child processes alive. "" when
  // nothing did; the next call compares with what is there now.
  std::string new_leftovers();

 private:
  struct Thread {
    std::string owner;  // "" for the harness's
    double cpu_ms = 0;
  };
  std::map<pid_t, Thread> threads_;
  std::vector<std::pair<void*, int>> handlers_;  // per signal: handler and flags
  std::set<pid_t> children_;
  int userfaultfds_ = 0;
};

}  // namespace crucible
