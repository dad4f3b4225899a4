// Environment capture (see environment.h).
#include "environment.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <boost/version.hpp>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "crucible/ops/build_info.h"
#include "crucible/reports/store.h"

#ifndef CRUCIBLE_SOURCE_DIR_FOR_GIT
#define CRUCIBLE_SOURCE_DIR_FOR_GIT ""
#endif

namespace crucible {

namespace {

std::string read_command(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "";
}

std::string isa_flags() {
  static const std::set<std::string> kInteresting = {
      "sse4_2",   "avx",         "avx2",        "fma",      "f16c",     "avx512f",  "avx512bw",
      "avx512vl", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile", "amx_int8"};
  std::string out;
  for (const std::string& f : cpu_flags()) {
    if (!kInteresting.contains(f)) continue;
    if (!out.empty()) out += ' ';
    out += f;
  }
  return out;
}

std::string affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
  }
  return out;
}

}  // namespace

std::string source_commit() {
  if (*CRUCIBLE_SOURCE_DIR_FOR_GIT == '\0') return "";
  const std::string dir = CRUCIBLE_SOURCE_DIR_FOR_GIT;
  std::string head = read_command("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
  if (head.empty()) return "";
  std::string dirty =
      read_command("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null");
  return dirty.empty() ? head : head + "-dirty";
}

int usable_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? std::max(1, CPU_COUNT(&cpus)) : 1;
}

std::vector<std::string> cpu_flags() {
  std::istringstream in(cpuinfo_field("flags"));
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

reports::RunEnvironment capture_environment(int threads) {
  reports::RunEnvironment e;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  e.hostname = host;
  utsname u{};
  if (uname(&u) == 0) e.os = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  e.cpu_model = cpuinfo_field("model name");
  e.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  e.isa_flags = isa_flags();
  e.compiler = fmt::format("g++ {}", __VERSION__);
  e.libraries = fmt::format("{}; SQLite {}; Boost {}", library_versions(),
                            reports::sqlite_version(), BOOST_LIB_VERSION);
  e.git_commit = source_commit();
  e.threads = threads;
  e.launcher["affinity"] = affinity();
  for (const char* var :
       {"OMP_NUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME", "OMP_PROC_BIND", "OMP_PLACES",
        "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "LD_PRELOAD", "MALLOC_CONF",
        "CRUCIBLE_ALLOC_CACHE_MB", "CRUCIBLE_LAUNCHER", "CRUCIBLE_INSTANCE"}) {
    if (const char* v = std::getenv(var)) e.launcher[var] = v;
  }
  return e;
}

void bind_worker_threads() {
  for (const char* var : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"}) {
    if (std::getenv(var) != nullptr) return;
  }
  ::setenv("OMP_PROC_BIND", "close", 0);
  ::setenv("OMP_PLACES", "cores", 0);
}

}  // namespace crucible
