// Thread attribution and CPU clocks, signal handlers, userfaultfd descriptors and child processes
// of the timing worker (see process_watch.h).
#include "process_watch.h"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

// A CPU clock in ms; negative when it cannot be read (a thread that has exited).
double clock_ms(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The CPU time of thread `tid` of this process, in ms; negative when it has exited. Linux encodes
// a thread's CPU clock as ((~tid) << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED.
double thread_cpu_ms(pid_t tid) {
  return clock_ms(static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u));
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

bool is_zombie(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Child processes that can still run (a zombie does no work).
std::set<pid_t> child_processes() {
  std::set<pid_t> out;
  for (pid_t tid : numeric_entries("/proc/self/task")) {
    std::ifstream in(fmt::format("/proc/self/task/{}/children", tid));
    pid_t child = 0;
    while (in >> child) {
      if (!is_zombie(child)) out.insert(child);
    }
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

double process_cpu_ms() { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

ProcessWatch::ProcessWatch()
    : handlers_(signal_handlers()),
      children_((prctl(PR_SET_CHILD_SUBREAPER, 1), child_processes())),
      harness_children_(children_),
      userfaultfds_(userfaultfd_count()) {
  for (pid_t tid : numeric_entries("/proc/self/task")) threads_[tid] = {{}, thread_cpu_ms(tid)};
}

std::map<std::string, double> ProcessWatch::read(const std::string& active) {
  std::map<std::string, double> used;
  std::map<pid_t, Thread> now;
  std::vector<std::pair<pid_t, double>> born;  // threads not seen before, with their CPU so far
  for (pid_t tid : numeric_entries("/proc/self/task")) {
    const double cpu = thread_cpu_ms(tid);
    if (cpu < 0) continue;
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      born.emplace_back(tid, cpu);
      continue;
    }
    Thread t = it->second;
    if (cpu > t.cpu_ms) {
      for (const std::string& o : t.owners) used[o] += cpu - t.cpu_ms;
    }
    t.cpu_ms = cpu;
    now[tid] = t;
  }
  // A thread is started by a thread that ran: by the active backend's code, or by a thread of
  // another backend that ran meanwhile, which had no business running. Each is charged with it,
  // so a thread left running cannot start a child while another backend is timed and have only
  // that backend charged, nor hide behind a second rogue backend.
  std::set<std::string> parents;
  if (!active.empty()) parents.insert(active);
  for (const auto& [owner, ms] : used) {
    if (ms > 0) parents.insert(owner);
  }
  for (const auto& [tid, cpu] : born) {
    for (const std::string& o : parents) used[o] += cpu;
    now[tid] = {parents, cpu};
  }
  threads_ = std::move(now);
  return used;
}

ProcessWatch::~ProcessWatch() { end_children(); }

void ProcessWatch::end_children() {
  for (pid_t c : child_processes()) {
    if (harness_children_.count(c)) continue;
    kill(c, SIGKILL);
    waitpid(c, nullptr, 0);
  }
}

std::vector<pid_t> ProcessWatch::threads_of(const std::string& owner) const {
  std::vector<pid_t> out;
  for (const auto& [tid, t] : threads_) {
    if (t.owners.count(owner)) out.push_back(tid);
  }
  return out;
}

std::string ProcessWatch::take_leftovers() {
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
  if (!out.empty()) end_children();
  return out;
}

}  // namespace crucible
