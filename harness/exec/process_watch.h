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

// The CPU time of every thread of this process, in ms: a timed sample's cpu_time beside its wall
// time.
double process_cpu_ms();

class ProcessWatch {
 public:
  // The threads alive now (the harness's own and OpenMP's pool, which every backend shares), the
  // signal handlers installed now and the child processes alive now belong to no backend. The
  // process becomes its descendants' subreaper, so a process a backend starts stays its child
  // even when its parent exits (a double fork).
  ProcessWatch();
  // Ends the child processes backends left.
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Reads every thread's CPU clock. A thread not seen before is attributed to `active`, the
  // backend whose code ran since the previous read (its own threads start there), and to each
  // other backend whose threads ran meanwhile. Returns the CPU milliseconds each backend's
  // threads used since the previous read (owners with none left out).
  std::map<std::string, double> read(const std::string& active);

  // The threads attributed to `owner` that are alive now.
  std::vector<pid_t> threads_of(const std::string& owner) const;

  // What changed in the process since the previous call that no harness code does: signal
  // handlers installed or replaced, userfaultfd descriptors open, child processes alive. "" when
  // nothing did; the next call compares with what is there now. Child processes, once named,
  // are killed: they must not disturb the timing that follows.
  std::string take_leftovers();

 private:
  // Kills and reaps the child processes alive now that the harness did not have at the start.
  void end_children();

  struct Thread {
    std::set<std::string> owners;  // none for the harness's; more than one when unsure
    double cpu_ms = 0;
  };
  std::map<pid_t, Thread> threads_;
  std::vector<std::pair<void*, int>> handlers_;  // per signal: handler and flags
  std::set<pid_t> children_;
  std::set<pid_t> harness_children_;
  int userfaultfds_ = 0;
};

}  // namespace crucible
