// Captures the machine and build facts a run is recorded with, and times the noise canary.
#pragma once

#include "crucible/reports/records.h"

namespace crucible {

// Hostname, OS, CPU model, online cores, ISA flags, compiler and library versions, the project's
// git commit, the CPU affinity and OpenMP/allocator variables in effect. `threads`: the worker
// thread count.
reports::RunEnvironment capture_environment(int threads);

// Milliseconds of a fixed single-threaded reference loop (a dependent integer chain that neither
// memory nor frequency boosts change much): recorded before each run so a noisy machine shows.
double noise_canary_ms();

}  // namespace crucible
