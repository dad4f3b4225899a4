// Captures the machine and build facts a run is recorded with.
#pragma once

#include "crucible/reports/records.h"

namespace crucible {

// Hostname, OS, CPU model, online cores, ISA flags, compiler and library versions, the project's
// git commit, the CPU affinity and OpenMP/allocator variables in effect. `threads`: the worker
// thread count.
reports::RunEnvironment capture_environment(int threads);

}  // namespace crucible
