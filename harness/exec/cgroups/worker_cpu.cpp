// Reading a timing worker's CPU from outside it (see worker_cpu.h).
#include "worker_cpu.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "memory_cgroup.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> g_groups{0};

// Sweeps stale groups (memory_cgroup.h) once per parent directory and process.
void sweep_once(const fs::path& parent) {
  static std::mutex mutex;
  static std::set<std::string> swept;
  const std::lock_guard<std::mutex> lock(mutex);
  if (swept.insert(parent.string()).second) remove_stale_groups(parent, "crucible-cpu-");
}

// A new group under `parent` holding `pid`, or "" when either step fails.
fs::path new_group_with(const fs::path& parent, pid_t pid) {
  sweep_once(parent);
  fs::path g = parent / fmt::format("crucible-cpu-{}-{}", ::getpid(), g_groups++);
  if (::mkdir(g.c_str(), 0755) != 0) return {};
  if (!write_cgroup_file(g / "cgroup.procs", std::to_string(pid)).empty()) {
    ::rmdir(g.c_str());
    return {};
  }
  return g;
}

// The v2 group `pid` is in, relative to the hierarchy's root ("" when unknown).
std::string v2_group_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cgroup", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

double field_ms(const std::string& text, const std::string& key, double scale) {
  std::istringstream in(text);
  std::string k;
  double v = 0;
  while (in >> k >> v) {
    if (k == key) return v * scale;
  }
  return NAN;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

WorkerCpu::WorkerCpu(pid_t pid) : pid_(pid) {
  std::string why;
  if (fs::path v1 = own_cgroup_dir(false, "cpuacct", why); !v1.empty()) {
    group_ = new_group_with(v1, pid);
    if (!group_.empty()) {
      own_group_ = true;
      how_ = "cgroup v1 cpuacct";
      return;
    }
  }
  if (fs::path v2 = own_cgroup_dir(true, "", why); !v2.empty()) {
    // A worker with a memory limit already has a v2 group of its own; a process is in one v2
    // group only, so that one is read.
    const std::string mine = v2_group_of(::getpid()), its = v2_group_of(pid);
    const std::string dir = v2.string();
    if (!its.empty() && its != mine && dir.size() >= mine.size() &&
        dir.compare(dir.size() - mine.size(), mine.size(), mine) == 0) {
      group_ = fs::path(dir.substr(0, dir.size() - mine.size())) / fs::path(its).relative_path();
    } else {
      group_ = new_group_with(v2, pid);
      own_group_ = !group_.empty();
    }
    if (!group_.empty()) {
      v2_ = true;
      how_ = "cgroup v2 cpu.stat";
      return;
    }
  }
  how_ = fmt::format("/proc/{}/stat (the process and the children it waited for)", pid);
  resolution_ms_ = 1e3 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

WorkerCpu::~WorkerCpu() {
  if (own_group_) remove_group(group_);
}

void WorkerCpu::kill_all() const {
  if (!group_.empty()) kill_group(group_);
}

double WorkerCpu::tree_ms() const {
  if (!group_.empty()) {
    if (v2_) return field_ms(read_all(group_ / "cpu.stat"), "usage_usec", 1e-3);
    const std::string ns = read_all(group_ / "cpuacct.usage");
    return ns.empty() ? NAN : std::strtod(ns.c_str(), nullptr) / 1e6;
  }
  // Fields 14-17 after the command's closing parenthesis: utime stime cutime cstime.
  const std::string stat = read_all(fmt::format("/proc/{}/stat", pid_));
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return NAN;
  std::istringstream in(stat.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int field = 3; field <= 17 && in >> f; ++field) {
    if (field >= 14) ticks += std::strtod(f.c_str(), nullptr);
  }
  return ticks * resolution_ms_;
}

bool thread_runnable(const fs::path& stat_path) {
  const std::string stat = read_all(stat_path);
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'R';
}

bool WorkerCpu::other_threads_running() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/task", pid_), ec)) {
    if (e.path().filename() == std::to_string(pid_)) continue;
    if (thread_runnable(e.path() / "stat")) return true;
  }
  return false;
}

bool WorkerCpu::main_thread_running() const {
  return thread_runnable(fmt::format("/proc/{}/task/{}/stat", pid_, pid_));
}

namespace {
// The second field of a schedstat file: ns waited on a run queue.
double wait_field_ms(const fs::path& p) {
  std::istringstream in(read_all(p));
  double run = 0, wait = 0;
  if (!(in >> run >> wait)) return NAN;
  return wait / 1e6;
}
}  // namespace

double thread_run_ms(const fs::path& schedstat) {
  std::istringstream in(read_all(schedstat));
  double run = 0;
  return in >> run ? run / 1e6 : NAN;
}

double own_thread_wait_ms() { return wait_field_ms("/proc/thread-self/schedstat"); }

double WorkerCpu::main_thread_wait_ms() const {
  return wait_field_ms(fmt::format("/proc/{}/task/{}/schedstat", pid_, pid_));
}

std::map<pid_t, std::string> WorkerCpu::placement() const {
  std::map<pid_t, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/task", pid_), ec)) {
    const auto tid = static_cast<pid_t>(std::atoi(e.path().filename().c_str()));
    // Field 19 of stat, the nice value: the 17th after the command's closing parenthesis.
    const std::string stat = read_all(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string f, nice;
    for (int field = 3; field <= 19 && fields >> f; ++field) {
      if (field == 19) nice = f;
    }
    std::string cpus;
    std::istringstream status(read_all(e.path() / "status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0)
        cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
    if (!nice.empty()) out[tid] = fmt::format("nice {}, CPUs {}", nice, cpus);
  }
  return out;
}

std::set<pid_t> WorkerCpu::members() const {
  std::set<pid_t> out;
  if (group_.empty()) return out;
  std::istringstream procs(read_all(group_ / "cgroup.procs"));
  for (pid_t p = 0; procs >> p;) out.insert(p);
  return out;
}

bool WorkerCpu::holds(pid_t pid) const { return pid == pid_ || members().count(pid) != 0; }

std::string WorkerCpu::stray() const {
  const std::set<pid_t> members = this->members();
  for (pid_t p : members) {
    if (p == pid_) continue;
    // The command sits in parentheses (it may hold either); the parent is the second field after.
    const std::string stat = read_all(fmt::format("/proc/{}/stat", p));
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    if (!(fields >> state >> parent) || state == "Z" || members.count(parent)) continue;
    return fmt::format("process {} ({}), whose parent is {}", p,
                       stat.substr(open + 1, close - open - 1), parent);
  }
  return "";
}

double WorkerCpu::main_thread_ms() const {
  const std::string s = read_all(fmt::format("/proc/{}/task/{}/schedstat", pid_, pid_));
  return s.empty() ? NAN : std::strtod(s.c_str(), nullptr) / 1e6;
}

}  // namespace crucible
