// Captures the machine and build facts a run is recorded with.
#pragma once

#include <string>
#include <vector>

#include "crucible/reports/records.h"

namespace crucible {

// Hostname, OS, CPU model, online cores, ISA flags, compiler and library versions, the project's
// git commit, the CPU affinity and OpenMP/allocator variables in effect. `threads`: the worker
// thread count.
reports::RunEnvironment capture_environment(int threads);

// The commit of the source tree this binary was built from, as git says now ("<hash>-dirty" with
// changes to tracked files; "" where the tree is gone or not a git checkout). Runs record it.
std::string source_commit();

// The CPUs this process (and the workers it starts) may run on: its affinity mask's count, 1 if
// it cannot be read.
int usable_cpus();

// The CPU's feature flags in /proc/cpuinfo's order ("avx2", "avx512f", "amx_tile", ...).
std::vector<std::string> cpu_flags();

// Pins the OpenMP threads of the workers this process starts, one per core in order
// (OMP_PROC_BIND=close, OMP_PLACES=cores, inherited by every worker), unless the environment
// already says how to bind (any of those, GOMP_CPU_AFFINITY or KMP_AFFINITY; OMP_PROC_BIND=false
// leaves them unbound). PyTorch's run_cpu launcher binds the same way: a bound thread keeps its
// cache and is not moved mid-sample (see docs/design_decisions.md, "Threads bound one per core").
void bind_worker_threads();

}  // namespace crucible
