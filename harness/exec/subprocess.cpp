// Child-process supervision (see subprocess.h).
#include "subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "crucible/core/error.h"
#include "landlock_sandbox.h"
#include "memory_cgroup.h"
#include "privileges.h"
#include "worker_cpu.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {
// The process groups of the children running now, one slot each: several threads may run a
// child at once (minify --jobs), and a signal handler must be able to kill them all, so the
// registry is a fixed array of atomics (no lock, no allocation).
constexpr int kChildSlots = 64;
std::array<std::atomic<pid_t>, kChildSlots> g_running_children{};

int register_child(pid_t pid) {
  for (int i = 0; i < kChildSlots; ++i) {
    pid_t none = 0;
    if (g_running_children[i].compare_exchange_strong(none, pid)) return i;
  }
  return -1;  // more children than slots: still waited on and timed out, only not signal-killed
}
}  // namespace

void kill_running_children() {
  for (auto& slot : g_running_children) {
    const pid_t pid = slot.load();
    if (pid > 0) ::kill(-pid, SIGKILL);
  }
}

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (!overrides.contains(s.substr(0, s.find('=')))) out.push_back(std::move(s));
  }
  for (const auto& [k, v] : overrides) out.push_back(fmt::format("{}={}", k, v));
  return out;
}

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return fmt::format("SIG{}", abbrev);
  return fmt::format("signal {}", sig);
}

fs::path self_executable() { return fs::read_symlink("/proc/self/exe"); }

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

namespace {

// What a child failed at before exec, sent to the parent through a close-on-exec pipe.
struct StartFailure {
  int stage = 0;  // 1: joining the cgroup, 2: exec, 3: dropping privileges, 4: the sandbox
  int error = 0;  // errno
};

// What a child's StartFailure::stage says it could not do.
std::string failed_step(int stage, const WorkerCgroup* group, const std::string& program) {
  switch (stage) {
    case 1:
      return fmt::format("cannot join its cgroup {}", group ? group->path().string() : "");
    case 3:
      return "cannot drop its privileges";
    case 4:
      return "cannot enter its sandbox";
    default:
      return fmt::format("cannot execute {}", program);
  }
}

// Once per process, on stderr: what a worker's sandbox cannot hold on this machine.
void warn_of_sandbox_gaps() {
  static std::atomic<bool> said{false};
  const SandboxSupport& s = sandbox_support();
  if ((s.abi > 0 && s.gaps.empty()) || said.exchange(true)) return;
  if (s.abi == 0) {
    std::cerr << fmt::format(
        "warning: workers run without a sandbox ({}): a plugin can write any file this user can\n",
        s.why_none);
  } else {
    std::cerr << fmt::format("warning: the workers' sandbox (Landlock ABI {}) does not stop {}\n",
                             s.abi, s.gaps);
  }
}

// Async-signal-safe: the decimal digits of `v` into `buf`, returning their count.
size_t format_pid(pid_t v, char* buf) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < sizeof tmp);
  for (size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

// In a forked child, async-signal-safe: the OOM killer's first choice, so that when the machine
// runs out of memory it ends a worker (a status) and not the harness (the night's run): a
// full-size training step's reference worker reached 13.6 GB beside a parent of 8.2 GB on 24 GB.
// Raising it needs no privilege; what the child starts inherits it.
void become_oom_first_choice() {
  if (const int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(adj, "1000", 4);
    ::close(adj);
  }
}

// The OOM kills of the machine so far (/proc/vmstat's oom_kill, Linux 4.13); 0 when unread.
int64_t machine_oom_kills() {
  std::ifstream in("/proc/vmstat");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

// run_child's second half, once the child has executed: it joins the registry of running
// children and its own process tree (worker_cpu.h), is waited for under its timeout, and whatever
// it left behind is killed.
ChildOutcome supervise(pid_t pid, std::chrono::steady_clock::time_point start,
                       const ChildLimits& limits, const ChildHooks& hooks,
                       const WorkerCgroup* group) {
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill below
  const int slot = register_child(pid);
  // Just executed: it has started nothing yet that could stay outside its tree.
  const auto tree = std::make_shared<const WorkerCpu>(pid);
  if (hooks.started) hooks.started(pid, tree);

  ChildOutcome out;
  const int64_t oom_kills_before = machine_oom_kills();
  int status = 0;
  rusage usage{};
  for (;;) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) break;
    if (r < 0 && errno != EINTR)
      throw Error(fmt::format("waiting for worker {}: {}", pid, strerror(errno)));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (limits.timeout_s > 0 && elapsed > limits.timeout_s && !out.timed_out) {
      out.timed_out = true;
      ::kill(-pid, SIGKILL);         // the whole group: a hung compiler child dies too
      if (group) group->kill_all();  // and any that left the process group
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(elapsed < 1.0 ? 2 : 20));
  }
  if (slot >= 0) g_running_children[slot] = 0;
  out.machine_oom_kills = machine_oom_kills() - oom_kills_before;
  if (out.timed_out) ::kill(-pid, SIGKILL);  // grandchildren left in the group
  tree->kill_all();  // and those that left it: nothing the worker started outlives it
  if (group) {
    out.memory_cgroup = true;
    out.oom_killed = group->oom_kills() > 0;
    out.cgroup_peak_mb = group->peak_mb();
    group->kill_all();  // nothing may outlive the worker in its group; the destructor removes it
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  if (WIFEXITED(status)) {
    out.exited = true;
    out.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  return out;
}

}  // namespace

// One function on purpose: everything between fork and exec must be async-signal-safe and see the
// descriptors and cgroup prepared before the fork; split, that contract would span functions.
ChildOutcome run_child(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env, const fs::path& log,
                       const ChildLimits& limits, const ChildHooks& hooks) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::map<std::string, std::string> child_env = env;
  const NoPrivileges no_privileges =
      limits.no_privileges ? prepare_no_privileges() : NoPrivileges{};
  std::optional<Sandbox> sandbox;
  if (limits.no_privileges) {
    warn_of_sandbox_gaps();
    sandbox.emplace(limits.writable);
  }
  if (limits.no_privileges && can_read_private_memory()) child_env[kPrivateMemoryEnv] = "1";
  std::vector<std::string> env_strings = merged_environment(child_env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::unique_ptr<WorkerCgroup> group;
  if (limits.memory_limit_mb > 0 && memory_limit_support().kind != MemoryLimitKind::kAddressSpace) {
    group = std::make_unique<WorkerCgroup>(memory_limit_support(), limits.memory_limit_mb);
  }
  const int procs_fd = group ? group->procs_fd() : -1;
  int report_pipe[2];
  if (::pipe2(report_pipe, O_CLOEXEC) != 0) {
    throw Error(fmt::format("cannot start a worker: pipe: {}", strerror(errno)));
  }
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ::close(report_pipe[0]);
    ::close(report_pipe[1]);
    throw Error(fmt::format("{}: cannot open log: {}", log.string(), strerror(errno)));
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(report_pipe[0]);
    ::close(report_pipe[1]);
    throw Error(fmt::format("cannot fork a worker: {}", strerror(errno)));
  }
  if (pid == 0) {
    ::close(report_pipe[0]);
    auto fail = [&](int stage) {
      const StartFailure f{stage, errno};
      [[maybe_unused]] ssize_t n = ::write(report_pipe[1], &f, sizeof f);
      ::_exit(127);
    };
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed harness takes its worker with it
    become_oom_first_choice();
    if (procs_fd >= 0) {
      // Into its own memory cgroup before exec, so everything it runs is charged there.
      char digits[16];
      const size_t n = format_pid(::getpid(), digits);
      if (::write(procs_fd, digits, n) != static_cast<ssize_t>(n)) fail(1);
    } else if (limits.memory_limit_mb > 0) {
      rlimit rl{};
      rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(limits.memory_limit_mb) << 20;
      ::setrlimit(RLIMIT_AS, &rl);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // Out of the way first (one may already sit at a target number), then to 3, 4, ...: dup2
    // clears close-on-exec on the copies only.
    int moved[8];
    const size_t passed = std::min(hooks.fds.size(), std::size(moved));
    for (size_t i = 0; i < passed; ++i) moved[i] = ::fcntl(hooks.fds[i], F_DUPFD_CLOEXEC, 64);
    for (size_t i = 0; i < passed; ++i) ::dup2(moved[i], static_cast<int>(3 + i));
    // Last: joining its cgroup above may need what it gives up here.
    if (limits.no_privileges && !drop_privileges(no_privileges)) fail(3);
    if (sandbox && !sandbox->enter()) fail(4);  // after no_new_privs, which Landlock needs
    ::execve(args[0], args.data(), envp.data());
    fail(2);
  }
  ::close(report_pipe[1]);
  StartFailure failure;
  ssize_t got;
  do {
    got = ::read(report_pipe[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  ::close(report_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    ::close(log_fd);
    ::waitpid(pid, nullptr, 0);
    throw Error(fmt::format("cannot start a worker: {}: {}",
                            failed_step(failure.stage, group.get(), argv[0]),
                            strerror(failure.error)));
  }
  ::close(log_fd);
  return supervise(pid, start, limits, hooks, group.get());
}

}  // namespace crucible
