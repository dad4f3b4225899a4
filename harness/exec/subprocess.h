// Runs a child process in its own process group with a wall-clock timeout and a memory limit (its
// own memory cgroup, else RLIMIT_AS), and reports how it ended with the kernel's accounting.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace crucible {

class WorkerCpu;

struct ChildLimits {
  double timeout_s = 0;  // 0: none; on expiry the whole process group gets SIGKILL
  // 0: none. Resident memory of the child and everything it starts, in a memory cgroup of its own
  // (memory_cgroup.h), where this machine allows one; else the child's RLIMIT_AS.
  int64_t memory_limit_mb = 0;
  // A worker that loads plugin code: it and all it runs hold no capability and cannot gain any
  // (privileges.h), it keeps its memory private when this process can still read it, and it is
  // sandboxed (landlock_sandbox.h): it may write below `writable` alone.
  bool no_privileges = false;
  std::vector<std::filesystem::path> writable;
};

struct ChildOutcome {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;  // terminating signal when !exited
  bool timed_out = false;
  bool memory_cgroup = false;  // the memory limit was the child's own cgroup, not RLIMIT_AS
  bool oom_killed = false;     // the kernel's OOM killer killed a process in the child's cgroup
  // Processes the kernel's OOM killer ended anywhere on the machine while the child ran
  // (/proc/vmstat's oom_kill): with no cgroup of its own, what says a SIGKILL was the machine's.
  int64_t machine_oom_kills = 0;
  double peak_rss_mb = 0;  // ru_maxrss of the child (max over it and the descendants it waited for)
  double cgroup_peak_mb = 0;  // peak charge of the child's cgroup, 0 without one
  double wall_s = 0;
};

// What a child gets besides its limits: descriptors it inherits (fds[i] becomes its descriptor
// 3 + i, at most 8), and a call in the parent once it has executed, with its pid and its process
// tree (worker_cpu.h), before the parent waits for it.
struct ChildHooks {
  std::vector<int> fds;
  std::function<void(pid_t, std::shared_ptr<const WorkerCpu>)> started;
};

// Starts argv[0] (an absolute path) with `argv`, extra environment `env` (added to this process's),
// stdout and stderr appended to `log`, stdin from /dev/null. Blocks until it ends or times out.
// Throws Error if the process cannot be started (also if it cannot join its cgroup or exec fails).
// The child's process tree is held in a cgroup of its own (worker_cpu.h) where the machine allows
// one: anything left in it when the child ends (a process that left the process group, a
// CLONE_PARENT sibling) is killed then. A memory cgroup is removed after the child, with anything
// left in it killed.
ChildOutcome run_child(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       const std::filesystem::path& log, const ChildLimits& limits,
                       const ChildHooks& hooks = {});

// This process's environment with `overrides` replacing or adding variables, as NAME=value strings.
std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides);

// Kills the process group of the child run_child is waiting for, if any (async-signal-safe).
void kill_running_children();

// "SIGSEGV" for 11, and so on.
std::string signal_name(int sig);

// The path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

// The first executable `name` in $PATH (/usr/bin:/bin without one); "" when there is none.
std::string find_in_path(const std::string& name);

}  // namespace crucible
