// Runs a child process in its own process group with a wall-clock timeout and an address-space
// limit, and reports how it ended together with the kernel's accounting of its peak RSS.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace crucible {

struct ChildLimits {
  double timeout_s = 0;         // 0: none; on expiry the whole process group gets SIGKILL
  int64_t memory_limit_mb = 0;  // 0: none; RLIMIT_AS of the child
};

struct ChildOutcome {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;  // terminating signal when !exited
  bool timed_out = false;
  double peak_rss_mb = 0;  // ru_maxrss of the child (max over it and the descendants it waited for)
  double wall_s = 0;
};

// Starts argv[0] (an absolute path) with `argv`, extra environment `env` (added to this process's),
// stdout and stderr appended to `log`, stdin from /dev/null. Blocks until it ends or times out.
// Throws Error if the process cannot be started.
ChildOutcome run_child(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       const std::filesystem::path& log, const ChildLimits& limits);

// This process's environment with `overrides` replacing or adding variables, as NAME=value strings.
std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides);

// Kills the process group of the child run_child is waiting for, if any (async-signal-safe).
void kill_running_children();

// "SIGSEGV" for 11, and so on.
std::string signal_name(int sig);

// The path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

}  // namespace crucible
