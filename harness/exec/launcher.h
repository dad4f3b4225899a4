// The CPU launcher (parity with torch.backends.xeon.run_cpu): re-executes `crucible run` under
// numactl core/memory binding with OpenMP, KMP and allocator settings, one process per instance.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace crucible {

struct LaunchOptions {
  std::string cores;  // "0-3,8" ; empty: every online core
  int membind = -1;   // NUMA node, -1: none
  int ninstances = 1;
  int ncores_per_instance = 0;        // 0: cores split evenly
  std::string omp_runtime = "gomp";   // gomp | llvm | intel
  std::string allocator = "default";  // default | jemalloc | tcmalloc
  int kmp_blocktime = -1;             // ms, -1: runtime default (intel/llvm only)
  std::string kmp_affinity;           // e.g. granularity=fine,compact,1,0 (intel/llvm only)
  bool dry_run = false;

  bool requested() const;  // any option beyond the defaults
};

struct LaunchInstance {
  std::vector<int> cores;
  std::map<std::string, std::string> env;  // variables set on top of the current environment
  std::vector<std::string> argv;           // full command, numactl first when used
};

struct LaunchPlan {
  std::vector<LaunchInstance> instances;
  std::vector<std::string> notes;  // one line each: every fallback taken, said out loud
};

// Parses "0-3,8,10-11" into a sorted, de-duplicated list; throws Error on malformed input.
std::vector<int> parse_core_list(const std::string& spec);
std::string format_core_list(const std::vector<int>& cores);

// Machine facts the plan depends on, injectable for tests.
struct LaunchHost {
  std::vector<int> online_cores;
  std::vector<int> numa_nodes;
  std::string numactl;  // path, "" when missing
  std::map<std::string, std::string>
      libraries;  // "jemalloc" -> "/usr/lib/.../libjemalloc.so.2", ...
  static LaunchHost detect();
};

// Builds the plan for re-running `self run run_args...`. Throws Error when a request cannot be met
// without changing what is measured (unknown core, missing allocator or OpenMP runtime).
LaunchPlan plan_launch(const LaunchOptions& opts, const LaunchHost& host, const std::string& self,
                       const std::vector<std::string>& run_args);

// Prints the notes, then either the plan (dry run) or runs every instance and waits; returns the
// highest exit status of the instances.
int execute_launch(const LaunchPlan& plan, bool dry_run);

// Shell-quoted one-line rendering of an instance: "VAR=value ... numactl -C 0 ... crucible run
// ...".
std::string describe_instance(const LaunchInstance& inst);

}  // namespace crucible
