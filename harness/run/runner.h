// `crucible run`'s engine, declared beside runner.cpp: the whole job from a RunConfig to the
// store's rows, the output folder and the CLI's exit code.
#pragma once

#include <cstdint>

#include "run_config.h"

namespace crucible {

// Runs the whole job and returns the CLI exit code (0 when every model passed or was
// skipped/xfail). `run_id`, when given, receives the stored run's id.
int execute_run(const RunConfig& config, int64_t* run_id = nullptr);

}  // namespace crucible
