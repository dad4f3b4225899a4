// Thread attribution and CPU clocks, signal handlers, userfaultfd descriptors and child processes
// of the timing worker (see process_watch.h).
#include "process_watch.h"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace crucible {

namespace {

std::vector<pid_t> numeric_entries(const char* dir) {
  std::vector<pid_t> out;
  if (DIR* d = opendir(dir)) {
    while (const dirent* e = readdir(d)) {
      char* end = nullptr;
      const long v = std::strtol(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0') out.push_back(static_cast<pid_t>(v));
    }
    closedir(d);
  }
  return out;
}

// The CPU time of thread `tid` of this process, in ms; negative when it has exited. Linux encodes
// a thread's CPU clock as ((~tid) << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED.
double thread_cpu_ms(pid_t tid) {
  const auto clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::vector<std::pair<void*, int>> signal_handlers() {
  std::vector<std::pair<void*, int>> out;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, nullptr, &sa) != 0) {
      out.emplace_back(nullptr, 0);
      continue;
    }
    void* h = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                         : reinterpret_cast<void*>(sa.sa_handler);
    out.emplace_back(h, sa.sa_flags & SA_SIGINFO);
  }
  return out;
}

std::set<pid_t> child_processes() {
  std::set<pid_t> out;
  for (pid_t tid : numeric_entries("/proc/self/task")) {
    std::ifstream in(fmt::format("/proc/self/task/{}/children", tid));
    pid_t child = 0;
    while (in >> child) out.insert(child);
  }
  return out;
}

int userfaultfd_count() {
  int n = 0;
  for (pid_t fd : numeric_entries("/proc/self/fd")) {
    char target[128] = {};
    const std::string link = fmt::format("/proc/self/fd/{}", fd);
    const ssize_t len = readlink(link.c_str(), target, sizeof target - 1);
    if (len > 0 && strstr(target, "userfaultfd") != nullptr) ++n;
  }
  return n;
}

}  // namespace

ProcessWatch::ProcessWatch()
    : handlers_(signal_handlers()),
      children_(child_processes()),
      userfaultfds_(userfaultfd_count()) {
  for (pid_t tid : numeric_entries("/proc/self/task")) threads_[tid] = {"", thread_cpu_ms(tid)};
}

std::map<std::string, double> ProcessWatch::read(const std::string& active) {
  std::map<std::string, double> used;
  std::map<pid_t, Thread> now;
  for (pid_t tid : numeric_entries("/proc/self/task")) {
    const double cpu = thread_cpu_ms(tid);
    if (cpu < 0) continue;
    auto it = threads_.find(tid);
    Thread t = it != threads_.end() ? it->second : Thread{active, 0};
    if (!t.owner.empty() && cpu > t.cpu_ms) used[t.owner] += cpu - t.cpu_ms;
    t.cpu_ms = cpu;
    now[tid] = t;
  }
  threads_ = std::move(now);
  return used;
}

std::vector<pid_t> ProcessWatch::threads_of(const std::string& owner) const {
  std::vector<pid_t> out;
  for (const auto& [tid, t] : threads_) {
    if (t.owner == owner) out.push_back(tid);
  }
  return out;
}

std::string ProcessWatch::new_leftovers() {
  std::string out;
  auto add = [&](const std::string& s) { out += out.empty() ? s : "; " + s; };
  const auto handlers = signal_handlers();
  for (size_t i = 0; i < handlers.size() && i < handlers_.size(); ++i) {
    if (handlers[i] != handlers_[i]) {
      const int sig = static_cast<int>(i) + 1;
      add(fmt::format("installed a handler for signal {} ({})", sig,
                      sigabbrev_np(sig) ? sigabbrev_np(sig) : "?"));
    }
  }
  handlers_ = handlers;
  const int uffd = userfaultfd_count();
  if (uffd > userfaultfds_)
    add(fmt::format("opened {} userfaultfd descriptor(s)", uffd - userfaultfds_));
  userfaultfds_ = uffd;
  std::set<pid_t> children = child_processes();
  for (pid_t c : children) {
    if (!children_.count(c)) add(fmt::format("started child process {}", c));
  }
  children_ = std::move(children);
  return out;
}

}  // namespace crucible
