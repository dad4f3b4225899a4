// Starts one `crucible worker` and collects what it left (see worker_launch.h).
#include "worker_launch.h"

#include "job_outcome.h"

namespace crucible {

WorkerRun run_worker(WorkerJob& job, const WorkerFiles& files,
                     const std::map<std::string, std::string>& env, const ChildLimits& limits,
                     const std::vector<std::string>& wrapper, const ChildHooks& hooks) {
  std::filesystem::remove(files.report);
  job.report = files.report.string();
  std::vector<std::string> argv = wrapper;
  argv.push_back(self_executable().string());
  for (auto& a : job.to_args()) argv.push_back(a);
  WorkerRun w;
  ChildLimits worker_limits = limits;
  worker_limits.no_privileges = true;  // it loads plugin code
  w.outcome = run_child(argv, env, files.log, worker_limits, hooks);
  w.report = read_report(files.report);
  w.results = finalize_job(job, w.outcome, w.report, files.log, limits);
  return w;
}

}  // namespace crucible
