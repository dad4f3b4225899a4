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

// The files of worker `label` of a run whose output folder is `out`: its report (and, at
// worker_tensors, its hand-off) in reports/<label>/, a folder no other worker may write, and its
// log (written through a descriptor this process opens) in logs/.
WorkerFiles worker_files(const std::filesystem::path& out, const std::string& label);
std::filesystem::path worker_tensors(const WorkerFiles& files);

// Folders (':'-separated) every worker may write besides its own: state a plugin keeps across
// its workers, such as a test plugin's gates.
inline constexpr const char* kWorkerWritableEnv = "CRUCIBLE_WORKER_WRITABLE";

// What a worker of `job` may write (its sandbox, landlock_sandbox.h), added to limits.writable:
// the folders of its report and of its hand-off (made here), a TMPDIR of its own in the first, its
// backend's own folder of the kernel cache (made if missing; both set in `env`), the folders its
// `debug_dir` options name,
// ./crucible_debug under CRUCIBLE_DEBUG, those kWorkerWritableEnv names, and /dev/shm. Throws Error
// when one cannot be made.
void allow_worker_writes(const WorkerJob& job, std::map<std::string, std::string>& env,
                         ChildLimits& limits);

struct WorkerRun {
  ChildOutcome outcome;
  WorkerReport report;
  std::vector<reports::ResultRecord> results;  // one per backend of the job
};

// Runs `job` (its report set to files.report) in a sandboxed `crucible worker` child with `env`
// added to the environment, under `wrapper` (a command the worker runs under, say valgrind) when
// given, with `hooks` (descriptors it inherits, a call once it runs).
WorkerRun run_worker(WorkerJob& job, const WorkerFiles& files,
                     const std::map<std::string, std::string>& env, const ChildLimits& limits,
                     const std::vector<std::string>& wrapper = {}, const ChildHooks& hooks = {});

}  // namespace crucible
