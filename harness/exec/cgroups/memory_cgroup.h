// How `crucible run --memory-limit` is enforced: each worker in its own memory cgroup (v2, else the
// v1 memory controller) limiting resident memory, with OOM kills counted; else RLIMIT_AS.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace crucible {

enum class MemoryLimitKind {
  kCgroupV2,      // memory.max, memory.swap.max = 0, memory.oom.group = 1
  kCgroupV1,      // memory.limit_in_bytes (and memsw) on the v1 memory controller
  kAddressSpace,  // RLIMIT_AS: counts reserved but untouched address space too
};

struct MemoryLimitSupport {
  MemoryLimitKind kind = MemoryLimitKind::kAddressSpace;
  std::filesystem::path parent;  // the cgroup directory worker groups are created in
  std::string why_not;           // kAddressSpace: why cgroups cannot be used here
};

// Probed once per process and cached: this process's own cgroup must offer the memory controller
// to a child group this process can create (cgroup v2: "memory" in cgroup.controllers and enabled,
// or enablable, in cgroup.subtree_control; v1: the memory hierarchy mounted and writable). Worker
// groups always go below this process's own cgroup, so whatever limits its parents set still
// apply. CRUCIBLE_NO_CGROUPS=1 forces the RLIMIT_AS fallback. Also removes empty groups left by
// crucible processes that no longer exist.
const MemoryLimitSupport& memory_limit_support();

// The directory of this process's cgroup: in the v2 hierarchy (`v2`), else in the v1 hierarchy
// holding `controller`; "" with `why` set when there is none this process can see.
std::filesystem::path own_cgroup_dir(bool v2, const std::string& controller, std::string& why);

// SIGKILL to every process in the cgroup `dir` (cgroup.kill where the kernel has it).
void kill_group(const std::filesystem::path& dir);
// Removes the cgroup `dir`, killing what is still in it until it can.
void remove_group(const std::filesystem::path& dir);
// Writes `text` to a cgroup file with one write(2), as cgroup files want; "" or why not.
std::string write_cgroup_file(const std::filesystem::path& p, const std::string& text);

// Removes the empty groups `parent`/<prefix><pid>-<n> whose crucible process <pid> is gone (it was
// killed before it could remove them).
void remove_stale_groups(const std::filesystem::path& parent, const std::string& prefix);

// The smallest --memory-limit (MB) a worker can start and compile under with this mechanism (see
// the measurements in memory_cgroup.cpp).
int64_t memory_limit_floor_mb(MemoryLimitKind kind);

// "resident memory (cgroup v1)" and so on, for messages.
std::string describe(MemoryLimitKind kind);

// One worker's cgroup with its limit, created before the worker starts and removed (after killing
// anything still in it) on destruction. The child joins it between fork and exec by writing its
// pid to procs_fd(), which is opened here (async-signal-safe in the child).
class WorkerCgroup {
 public:
  WorkerCgroup(const MemoryLimitSupport& support, int64_t limit_mb);  // throws Error
  ~WorkerCgroup();
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;

  int procs_fd() const { return procs_fd_; }
  const std::filesystem::path& path() const { return dir_; }
  // How many processes of the group the kernel's OOM killer has killed.
  int64_t oom_kills() const;
  // The group's peak memory charge in MB (0 if the kernel does not say).
  double peak_mb() const;
  // SIGKILL to every process still in the group (a grandchild that left the process group too).
  void kill_all() const;

 private:
  MemoryLimitKind kind_;
  std::filesystem::path dir_;
  int procs_fd_ = -1;
};

}  // namespace crucible
