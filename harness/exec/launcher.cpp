// Launch planning and execution (see launcher.h). When numactl is missing the child binds itself
// with sched_setaffinity (CRUCIBLE_AFFINITY) before running; when a requested allocator or OpenMP
// runtime is missing the launch stops, since a silent substitution would change what is measured.
#include "launcher.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "crucible/core/error.h"
#include "subprocess.h"

namespace crucible {

namespace fs = std::filesystem;

bool LaunchOptions::requested() const {
  return !cores.empty() || membind >= 0 || ninstances != 1 || ncores_per_instance != 0 ||
         omp_runtime != "gomp" || allocator != "default" || kmp_blocktime >= 0 ||
         !kmp_affinity.empty() || dry_run;
}

std::vector<int> parse_core_list(const std::string& spec) {
  std::set<int> out;
  std::stringstream ss(spec);
  std::string item;
  auto bad = [&] {
    return Error(fmt::format("--cores: malformed core list '{}' (expected e.g. 0-3,8)", spec));
  };
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw bad();
    const size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int c = std::stoi(item, &used);
        if (used != item.size() || c < 0) throw bad();
        out.insert(c);
      } else {
        int a = std::stoi(item.substr(0, dash), &used);
        if (used != dash) throw bad();
        const std::string rest = item.substr(dash + 1);
        int b = std::stoi(rest, &used);
        if (used != rest.size() || a < 0 || b < a) throw bad();
        for (int c = a; c <= b; ++c) out.insert(c);
      }
    } catch (const std::logic_error&) {
      throw bad();
    }
  }
  if (out.empty()) throw bad();
  return {out.begin(), out.end()};
}

std::string format_core_list(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    out += (out.empty() ? "" : ",") +
           (i == j ? std::to_string(cores[i]) : fmt::format("{}-{}", cores[i], cores[j]));
    i = j + 1;
  }
  return out;
}

namespace {

std::string find_library(const std::vector<std::string>& names) {
  for (const char* dir :
       {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}) {
    for (const auto& n : names) {
      fs::path p = fs::path(dir) / n;
      if (fs::exists(p)) return p.string();
    }
  }
  return "";
}

std::string quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") ==
                        std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

LaunchHost LaunchHost::detect() {
  LaunchHost h;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) h.online_cores.push_back(c);
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("node", 0) == 0 && n.size() > 4 && std::isdigit(static_cast<unsigned char>(n[4]))) {
      h.numa_nodes.push_back(std::stoi(n.substr(4)));
    }
  }
  std::sort(h.numa_nodes.begin(), h.numa_nodes.end());
  if (h.numa_nodes.empty()) h.numa_nodes.push_back(0);
  h.numactl = find_in_path("numactl");
  h.libraries["jemalloc"] = find_library({"libjemalloc.so", "libjemalloc.so.2"});
  h.libraries["tcmalloc"] =
      find_library({"libtcmalloc.so", "libtcmalloc.so.4", "libtcmalloc_minimal.so.4"});
  h.libraries["intel"] = find_library({"libiomp5.so"});
  h.libraries["llvm"] = find_library({"libomp.so", "libomp.so.5"});
  return h;
}

namespace {

// The libraries LD_PRELOAD carries for the asked OpenMP runtime and allocator; Error when one is
// unknown or not installed.
std::vector<std::string> preload_libraries(const LaunchOptions& o, const LaunchHost& host) {
  const auto installed = [&](const std::string& name) {
    return host.libraries.count(name) ? host.libraries.at(name) : std::string();
  };
  std::vector<std::string> preload;
  if (o.omp_runtime != "gomp") {
    if (o.omp_runtime != "llvm" && o.omp_runtime != "intel") {
      throw Error(
          fmt::format("--omp-runtime must be gomp, llvm or intel, got '{}'", o.omp_runtime));
    }
    const std::string lib = installed(o.omp_runtime);
    if (lib.empty()) {
      throw Error(fmt::format("launcher: OpenMP runtime '{}' requested but {} is not installed{}",
                              o.omp_runtime, o.omp_runtime == "intel" ? "libiomp5.so" : "libomp.so",
                              o.omp_runtime == "llvm" ? " (apt-get install libomp-dev)" : ""));
    }
    preload.push_back(lib);
  } else if (o.kmp_blocktime >= 0 || !o.kmp_affinity.empty()) {
    throw Error(
        "--kmp-blocktime and --kmp-affinity need --omp-runtime llvm or intel (GNU OpenMP ignores "
        "KMP_*)");
  }
  if (o.allocator != "default") {
    if (o.allocator != "jemalloc" && o.allocator != "tcmalloc") {
      throw Error(
          fmt::format("--allocator must be default, jemalloc or tcmalloc, got '{}'", o.allocator));
    }
    const std::string lib = installed(o.allocator);
    if (lib.empty()) {
      throw Error(fmt::format(
          "launcher: allocator '{}' requested but it is not installed (apt-get install {})",
          o.allocator, o.allocator == "jemalloc" ? "libjemalloc2" : "libgoogle-perftools4"));
    }
    preload.push_back(lib);
  }
  return preload;
}

}  // namespace

LaunchPlan plan_launch(const LaunchOptions& o, const LaunchHost& host, const std::string& self,
                       const std::vector<std::string>& run_args) {
  LaunchPlan plan;
  if (o.ninstances < 1) throw Error("--ninstances must be at least 1");
  if (o.ncores_per_instance < 0) throw Error("--ncores-per-instance must be positive");
  std::vector<int> cores = o.cores.empty() ? host.online_cores : parse_core_list(o.cores);
  for (int c : cores) {
    if (std::find(host.online_cores.begin(), host.online_cores.end(), c) ==
        host.online_cores.end()) {
      throw Error(fmt::format("--cores: core {} is not available here (available: {})", c,
                              format_core_list(host.online_cores)));
    }
  }
  const int per = o.ncores_per_instance > 0 ? o.ncores_per_instance
                                            : static_cast<int>(cores.size()) / o.ninstances;
  if (per < 1 || static_cast<size_t>(per) * o.ninstances > cores.size()) {
    throw Error(fmt::format("{} instance(s) x {} core(s) need {} cores, only {} given ({})",
                            o.ninstances, std::max(per, 1), std::max(per, 1) * o.ninstances,
                            cores.size(), format_core_list(cores)));
  }
  int membind = o.membind;
  if (membind >= 0 &&
      std::find(host.numa_nodes.begin(), host.numa_nodes.end(), membind) == host.numa_nodes.end()) {
    plan.notes.push_back(
        fmt::format("launcher: NUMA node {} does not exist (this machine has {} node(s): {}); "
                    "running without memory binding",
                    membind, host.numa_nodes.size(), format_core_list(host.numa_nodes)));
    membind = -1;
  }
  if (host.numactl.empty()) {
    plan.notes.push_back(
        "launcher: numactl not found (apt-get install numactl); binding cores with "
        "sched_setaffinity instead" +
        std::string(membind >= 0 ? " and without memory binding" : ""));
  }
  const std::vector<std::string> preload = preload_libraries(o, host);
  for (int i = 0; i < o.ninstances; ++i) {
    LaunchInstance inst;
    inst.cores.assign(cores.begin() + i * per, cores.begin() + (i + 1) * per);
    const std::string list = format_core_list(inst.cores);
    inst.env["OMP_NUM_THREADS"] = std::to_string(per);
    if (o.omp_runtime != "gomp") {
      inst.env["KMP_AFFINITY"] =
          o.kmp_affinity.empty() ? "granularity=fine,compact,1,0" : o.kmp_affinity;
      inst.env["KMP_BLOCKTIME"] = std::to_string(o.kmp_blocktime >= 0 ? o.kmp_blocktime : 1);
    }
    if (o.allocator == "jemalloc") {
      // run_cpu's settings: no decay, so freed pages are reused rather than returned and refaulted.
      inst.env["MALLOC_CONF"] =
          "oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,"
          "muzzy_decay_ms:-1";
    }
    if (!preload.empty()) {
      std::string p;
      for (const auto& l : preload) p += (p.empty() ? "" : ":") + l;
      inst.env["LD_PRELOAD"] = p;
    }
    std::string desc = fmt::format("cores={} membind={} instance={}/{} omp={} allocator={}", list,
                                   membind >= 0 ? std::to_string(membind) : "none", i, o.ninstances,
                                   o.omp_runtime, o.allocator);
    inst.env["CRUCIBLE_LAUNCHER"] = desc;
    inst.env["CRUCIBLE_INSTANCE"] = fmt::format("{}/{}", i, o.ninstances);
    inst.env["CRUCIBLE_LAUNCHED"] = "1";
    if (!host.numactl.empty()) {
      inst.argv = {host.numactl, "-C", list};
      if (membind >= 0) {
        inst.argv.push_back("-m");
        inst.argv.push_back(std::to_string(membind));
      }
    } else {
      inst.env["CRUCIBLE_AFFINITY"] = list;
    }
    inst.argv.push_back(self);
    inst.argv.push_back("run");
    inst.argv.insert(inst.argv.end(), run_args.begin(), run_args.end());
    plan.instances.push_back(std::move(inst));
  }
  return plan;
}

std::string describe_instance(const LaunchInstance& inst) {
  std::string out;
  for (const auto& [k, v] : inst.env) out += k + "=" + quote(v) + " ";
  for (size_t i = 0; i < inst.argv.size(); ++i) out += (i ? " " : "") + quote(inst.argv[i]);
  return out;
}

int execute_launch(const LaunchPlan& plan, bool dry_run) {
  for (const auto& n : plan.notes) std::cerr << n << "\n";
  if (dry_run) {
    for (size_t i = 0; i < plan.instances.size(); ++i) {
      std::cout << fmt::format("instance {}: {}\n", i, describe_instance(plan.instances[i]));
    }
    return 0;
  }
#ifdef CRUCIBLE_SANITIZED
  // The sanitizer's runtime must be the first library and its allocator the only one.
  for (const auto& inst : plan.instances) {
    if (inst.env.count("LD_PRELOAD")) {
      throw Error(fmt::format(
          "launcher: this crucible is built with -fsanitize={}, which cannot run beside a "
          "preloaded library ({}); drop --allocator and --omp-runtime, or use a normal build",
          CRUCIBLE_SANITIZED, inst.env.at("LD_PRELOAD")));
    }
  }
#endif
  std::vector<pid_t> pids;
  for (const auto& inst : plan.instances) {
    std::vector<std::string> env_strings = merged_environment(inst.env);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (const auto& a : inst.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error("launcher: cannot fork an instance");
    if (pid == 0) {
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, code);
  }
  return worst;
}

}  // namespace crucible
