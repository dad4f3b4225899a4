// The parent's side of one worker: the argv of `crucible worker` for a job, the child run under
// its limits, and how it ended turned into results (job_outcome.h).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crucible/reports/records.h"
#include "subprocess.h"
#include "worker.h"
#include "worker_report.h"

namespace crucible {

struct WorkerFiles {
  std::filesystem::path report;  // replaced: the worker writes it anew
  std::filesystem::path log;
};

struct WorkerRun {
  ChildOutcome outcome;
  WorkerReport report;
  std::vector<reports::ResultRecord> results;  // one per backend of the job
};

// Runs `job` (its report set to files.report) in a `crucible worker` child with `env` added to the
// environment, under `wrapper` (a command the worker runs under, say valgrind) when given, with
// `hooks` (descriptors it inherits, a call once it runs).
WorkerRun run_worker(WorkerJob& job, const WorkerFiles& files,
                     const std::map<std::string, std::string>& env, const ChildLimits& limits,
                     const std::vector<std::string>& wrapper = {}, const ChildHooks& hooks = {});

}  // namespace crucible
