// Worker memory cgroups (see memory_cgroup.h): finding this process's cgroup through
// /proc/self/cgroup and /proc/self/mountinfo, probing it, and one limited child group per worker.
#include "memory_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "crucible/core/error.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

// Floors, measured on the tutorial's linear_layernorm_relu with 2 threads (Debian 12, GCC 12,
// oneDNN 2.6). In a memory cgroup a worker's own resident set is 10-14 MB (the binary, oneDNN and
// the plugin, mostly shared file pages) and eager passed even at 8 MB; but codegen runs the C++
// compiler inside the same group, and cc1plus was OOM-killed at 16 and 24 MB and passed at 32 MB.
// 64 MB gives the smallest compile twice that; a lower limit could only turn every model into oom.
// Under RLIMIT_AS the dynamic loader cannot even map libdnnl below 64 MB (50 MB failed: "failed to
// map segment"), and each further thread reserves a 64 MB malloc arena, hence 128 MB there.
constexpr int64_t kCgroupFloorMb = 64;
constexpr int64_t kAddressSpaceFloorMb = 128;

std::string errno_text() { return strerror(errno); }

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` with one write(2), as cgroup files want; "" on success, else the reason.
std::string write_text(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno_text();
  const ssize_t n = ::write(fd, text.data(), text.size());
  const std::string why = n == static_cast<ssize_t>(text.size()) ? "" : errno_text();
  ::close(fd);
  return why;
}

bool has_word(const std::string& text, const std::string& word, char sep = ' ') {
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) {
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.pop_back();
    if (item == word) return true;
  }
  return false;
}

// "<key> <n>" from a flat-keyed cgroup file (memory.events, memory.oom_control).
int64_t keyed_value(const fs::path& p, const std::string& key) {
  std::ifstream in(p);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string unescape_mount_path(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

struct Mount {
  std::string root, point;
};

// The cgroup2 mount, or the cgroup (v1) mount whose super options include `controller`.
std::optional<Mount> find_mount(bool v2, const std::string& controller) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 3 >= fields.size()) continue;
    const std::string& type = fields[dash + 1];
    const std::string& options = fields[dash + 3];
    if (v2 ? type == "cgroup2" : (type == "cgroup" && has_word(options, controller, ','))) {
      return Mount{unescape_mount_path(fields[3]), unescape_mount_path(fields[4])};
    }
  }
  return std::nullopt;
}

// This process's cgroup path in the v2 hierarchy (v2) or in the hierarchy holding `controller`.
std::optional<std::string> own_cgroup(bool v2, const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? (id == "0" && controllers.empty()) : has_word(controllers, controller, ',')) {
      return line.substr(b + 1);
    }
  }
  return std::nullopt;
}

std::atomic<unsigned> g_group_counter{0};

fs::path new_group_name(const fs::path& parent) {
  return parent / fmt::format("crucible-{}-{}", ::getpid(), g_group_counter++);
}

// Creates, limits and removes a probe group under `dir`; "" if that all works, else the reason.
std::string probe(MemoryLimitKind kind, const fs::path& dir) {
  const fs::path g = new_group_name(dir);
  if (::mkdir(g.c_str(), 0755) != 0) {
    return fmt::format("cannot create a cgroup in {}: {}", dir.string(), errno_text());
  }
  const fs::path limit =
      g / (kind == MemoryLimitKind::kCgroupV2 ? "memory.max" : "memory.limit_in_bytes");
  std::string why = write_text(limit, std::to_string(int64_t{1} << 30));
  if (!why.empty()) why = fmt::format("cannot write {}: {}", limit.string(), why);
  ::rmdir(g.c_str());
  return why;
}

// Support of `kind` with worker groups in `dir`, its stale groups swept.
MemoryLimitSupport usable(MemoryLimitKind kind, const fs::path& dir) {
  remove_stale_groups(dir, "crucible-");
  return {kind, dir, ""};
}

MemoryLimitSupport detect() {
  MemoryLimitSupport s;
  if (const char* off = std::getenv("CRUCIBLE_NO_CGROUPS");
      off && *off && std::string(off) != "0") {
    s.why_not = "CRUCIBLE_NO_CGROUPS is set";
    return s;
  }
  std::vector<std::string> reasons;
  // cgroup v2: the memory controller must be enabled for this group's children. A cgroup with
  // processes in it (this one) may only enable it if it is the root: cgroup v2 keeps processes in
  // leaves. Nothing is moved to make room: that would change the caller's cgroup layout.
  std::string why;
  if (fs::path dir = own_cgroup_dir(true, "memory", why); !dir.empty()) {
    const auto controllers = read_text(dir / "cgroup.controllers");
    const auto subtree = read_text(dir / "cgroup.subtree_control");
    if (!controllers || !has_word(*controllers, "memory")) {
      reasons.push_back(fmt::format("cgroup v2 offers no memory controller in {}", dir.string()));
    } else if (!subtree) {
      reasons.push_back(fmt::format("cannot read {}/cgroup.subtree_control", dir.string()));
    } else {
      std::string enable;
      if (!has_word(*subtree, "memory"))
        enable = write_text(dir / "cgroup.subtree_control", "+memory");
      if (!enable.empty()) {
        reasons.push_back(fmt::format(
            "cgroup v2: cannot enable the memory controller below {} ({}; a cgroup holding "
            "processes cannot, except the root)",
            dir.string(), enable));
      } else if (std::string p = probe(MemoryLimitKind::kCgroupV2, dir); !p.empty()) {
        reasons.push_back("cgroup v2: " + p);
      } else {
        return usable(MemoryLimitKind::kCgroupV2, dir);
      }
    }
  } else {
    reasons.push_back(why);
  }
  // cgroup v1's memory controller (hybrid layouts): no such rule, a child group always works if
  // we may create it.
  why.clear();
  if (fs::path dir = own_cgroup_dir(false, "memory", why); !dir.empty()) {
    if (std::string p = probe(MemoryLimitKind::kCgroupV1, dir); !p.empty()) {
      reasons.push_back("cgroup v1: " + p);
    } else {
      return usable(MemoryLimitKind::kCgroupV1, dir);
    }
  } else {
    reasons.push_back(why);
  }
  for (const auto& r : reasons) s.why_not += (s.why_not.empty() ? "" : "; ") + r;
  return s;
}

}  // namespace

void remove_stale_groups(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix) || !e.is_directory(ec)) continue;
    const std::string rest = name.substr(prefix.size());
    const auto pid = static_cast<pid_t>(std::atoll(rest.substr(0, rest.find('-')).c_str()));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    ::rmdir(e.path().c_str());  // fails, harmlessly, while a process is still in it
  }
}

fs::path own_cgroup_dir(bool v2, const std::string& controller, std::string& why) {
  const std::string what =
      v2 ? "cgroup v2" : fmt::format("the cgroup v1 {} controller", controller);
  const auto mount = find_mount(v2, controller);
  if (!mount) {
    why = fmt::format("{} is not mounted", what);
    return {};
  }
  const auto path = own_cgroup(v2, controller);
  if (!path) {
    why = fmt::format("/proc/self/cgroup names no {} group", v2 ? "cgroup v2" : controller);
    return {};
  }
  std::string rel = *path;
  if (mount->root != "/") {
    if (rel.rfind(mount->root, 0) != 0) {
      why = fmt::format("this process's cgroup {} is outside the mounted part {} of {}", rel,
                        mount->root, what);
      return {};
    }
    rel = rel.substr(mount->root.size());
  }
  return fs::path(mount->point) / fs::path(rel).relative_path();
}

const MemoryLimitSupport& memory_limit_support() {
  static const MemoryLimitSupport support = detect();
  return support;
}

int64_t memory_limit_floor_mb(MemoryLimitKind kind) {
  return kind == MemoryLimitKind::kAddressSpace ? kAddressSpaceFloorMb : kCgroupFloorMb;
}

std::string describe(MemoryLimitKind kind) {
  switch (kind) {
    case MemoryLimitKind::kCgroupV2:
      return "resident memory (cgroup v2 memory.max, no swap)";
    case MemoryLimitKind::kCgroupV1:
      return "resident memory (cgroup v1 memory.limit_in_bytes, no swap)";
    case MemoryLimitKind::kAddressSpace:
      return "address space (RLIMIT_AS)";
  }
  return "";
}

WorkerCgroup::WorkerCgroup(const MemoryLimitSupport& support, int64_t limit_mb)
    : kind_(support.kind), dir_(new_group_name(support.parent)) {
  if (::mkdir(dir_.c_str(), 0755) != 0) {
    throw Error(
        fmt::format("cannot create the worker's cgroup {}: {}", dir_.string(), errno_text()));
  }
  const std::string bytes = std::to_string(limit_mb << 20);
  std::string why;
  fs::path failed;
  auto set = [&](const char* file, const std::string& value, bool required) {
    if (!why.empty()) return;
    const fs::path p = dir_ / file;
    if (!required && !fs::exists(p)) return;
    const std::string w = write_text(p, value);
    if (!w.empty() && required) {
      why = w;
      failed = p;
    }
  };
  if (kind_ == MemoryLimitKind::kCgroupV2) {
    set("memory.max", bytes, true);
    set("memory.swap.max", "0", false);   // only with swap accounting
    set("memory.oom.group", "1", false);  // an OOM kill takes the whole worker, not one thread
  } else {
    set("memory.limit_in_bytes", bytes, true);
    set("memory.memsw.limit_in_bytes", bytes, false);  // memory + swap = memory: no swap
    set("memory.swappiness", "0", false);
  }
  if (why.empty()) {
    procs_fd_ = ::open((dir_ / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs_fd_ < 0) {
      why = errno_text();
      failed = dir_ / "cgroup.procs";
    }
  }
  if (!why.empty()) {
    ::rmdir(dir_.c_str());
    throw Error(fmt::format("cannot set up the worker's cgroup: {}: {}", failed.string(), why));
  }
}

WorkerCgroup::~WorkerCgroup() {
  if (procs_fd_ >= 0) ::close(procs_fd_);
  remove_group(dir_);
}

int64_t WorkerCgroup::oom_kills() const {
  return kind_ == MemoryLimitKind::kCgroupV2 ? keyed_value(dir_ / "memory.events", "oom_kill")
                                             : keyed_value(dir_ / "memory.oom_control", "oom_kill");
}

double WorkerCgroup::peak_mb() const {
  const fs::path p =
      dir_ / (kind_ == MemoryLimitKind::kCgroupV2 ? "memory.peak" : "memory.max_usage_in_bytes");
  const auto text = read_text(p);
  if (!text) return 0;
  return static_cast<double>(std::atoll(text->c_str())) / (1 << 20);
}

void WorkerCgroup::kill_all() const { kill_group(dir_); }

void kill_group(const fs::path& dir) {
  if (write_text(dir / "cgroup.kill", "1").empty()) return;  // cgroup v2 from Linux 5.14
  std::ifstream in(dir / "cgroup.procs");
  for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
}

void remove_group(const fs::path& dir) {
  // Killed processes leave the group a moment after the signal; rmdir fails (EBUSY) until then.
  for (int i = 0; i < 200; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    kill_group(dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string write_cgroup_file(const fs::path& p, const std::string& text) {
  return write_text(p, text);
}

}  // namespace crucible
