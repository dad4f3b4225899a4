// A worker's process tree as its parent sees it, out of the worker's reach: a cgroup of its own
// holding everything it starts (children that left its process group, CLONE_PARENT siblings), the
// tree's CPU time and its main thread's, and the end of all of it when the worker ends.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

namespace crucible {

// ms the calling thread has waited for a CPU while runnable (its schedstat), NaN when unreadable.
double own_thread_wait_ms();

// Whether the thread whose /proc stat file is `stat` is running or runnable.
bool thread_runnable(const std::filesystem::path& stat);
// ms the thread whose /proc schedstat file is `schedstat` has run, NaN when unreadable.
double thread_run_ms(const std::filesystem::path& schedstat);

class WorkerCpu {
 public:
  // Puts `pid` (just started, before it loads a plugin) in a CPU accounting cgroup of its own: a
  // cgroup v1 cpuacct group, or its cgroup v2 group (the memory group it already has, else a new
  // one). Where neither can be made, the tree is read from /proc/<pid>/stat: the process with the
  // children it waited for, at the kernel's tick.
  explicit WorkerCpu(pid_t pid);
  ~WorkerCpu();  // anything left in the group is killed, the group removed
  // SIGKILL to everything in the group (nothing without one: the process group is the caller's).
  void kill_all() const;
  WorkerCpu(const WorkerCpu&) = delete;
  WorkerCpu& operator=(const WorkerCpu&) = delete;

  // ms of CPU used so far; NaN once the worker is gone or unreadable.
  double tree_ms() const;
  double main_thread_ms() const;
  // ms its main thread has waited for a CPU while runnable (schedstat), NaN when unreadable.
  double main_thread_wait_ms() const;
  // Whether a thread of the worker other than its main one is running or runnable (a pool spinning
  // after its call): the scheduler's CPU figures lag a running thread by up to a tick, its state
  // does not.
  bool other_threads_running() const;
  bool main_thread_running() const;
  // Each thread's priority and the CPUs it may run on ("nice 0, CPUs 0-1"), by thread id: a
  // process of the same user may change another's (sched_setaffinity, setpriority) to slow it.
  std::map<pid_t, std::string> placement() const;
  // Whether process `pid` is the worker or in its cgroup (the worker alone without one).
  bool holds(pid_t pid) const;
  // A process in its cgroup, other than the worker, whose parent is outside the group: started
  // with CLONE_PARENT or left by a double fork, it runs beside the worker's tree, not in it.
  // Named as "process P (comm), whose parent is Q"; "" for none, and always "" without a group.
  std::string stray() const;
  // How tree_ms is read, for messages ("cgroup v1 cpuacct", ...).
  const std::string& how() const { return how_; }
  // The smallest step tree_ms moves by (a tick of /proc/<pid>/stat, else 0).
  double resolution_ms() const { return resolution_ms_; }

 private:
  // The processes of its cgroup (none without one).
  std::set<pid_t> members() const;

  pid_t pid_;
  std::filesystem::path group_;  // empty: /proc/<pid>/stat
  bool v2_ = false;
  bool own_group_ = false;  // created here, so removed here
  std::string how_;
  double resolution_ms_ = 0;
};

}  // namespace crucible
