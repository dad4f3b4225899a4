// The worker-backed oracle (see oracle.h).
#include "oracle.h"

#include <fmt/format.h>

#include "accuracy_check.h"
#include "worker_launch.h"

namespace crucible::minify {

namespace fs = std::filesystem;

Verdict Oracle::test(const Candidate& c) {
  const std::string key = c.key();
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++cache_hits_;
      Verdict v = it->second;
      v.cached = true;
      return v;
    }
  }
  Verdict v = run(c);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  cache_[key] = v;
  return v;
}

Verdict Oracle::run(const Candidate& c) { return evaluate(c, next_call()); }

Verdict Oracle::evaluate(const Candidate& c, int n) {
  const fs::path dir = prepare(c, n);
  const WorkerJob job = job_for("outputs", dir, c);
  auto files = [&](const std::string& role) {
    return CheckFiles{{dir / (role + ".report"), dir / (role + ".log")}, dir / (role + ".tensors")};
  };
  const CheckLaunch launch{cache_env(), cfg_.limits};
  const ReferenceOutcome reference = compute_reference(job, files("reference"), launch);
  const reports::ResultRecord r = check_accuracy(job, reference, files("worker"), launch);
  forget_old_calls(n);
  Verdict v;
  v.signature = signature_of(r);
  v.error = r.error;
  v.backend_version = r.backend_version;
  return v;
}

std::string Oracle::localize(const Candidate& c) {
  const int n = next_call();
  const fs::path dir = prepare(c, n);
  WorkerJob job = job_for("cosim", dir, c);
  const WorkerRun w =
      run_worker(job, {dir / "worker.report", dir / "worker.log"}, cache_env(), cfg_.limits);
  forget_old_calls(n);
  if (!w.report.reply || w.report.reply->exit_code != 0) return "";
  const std::string& out = w.report.reply->out;
  return out.rfind("node ", 0) == 0 ? out.substr(5) : "";
}

fs::path Oracle::prepare(const Candidate& c, int n) const {
  const fs::path dir = cfg_.work_dir / fmt::format("call{:04d}", n);
  fs::remove_all(dir);
  c.write(dir);
  return dir;
}

WorkerJob Oracle::job_for(const std::string& kind, const fs::path& dir, const Candidate& c) const {
  WorkerJob job;
  job.job = kind;
  job.graph = (dir / "graph.graph").string();
  job.suite = "minify";
  job.model = c.graph.name();
  job.backends = {cfg_.backend};
  job.threads = cfg_.threads;
  job.tolerance = cfg_.tolerance;
  job.cosine = cfg_.cosine;
  job.scaled_tolerance = cfg_.scaled_tolerance;
  job.plugin_paths = cfg_.plugin_paths;
  job.config = cfg_.config;
  if (!cfg_.backend_env.empty()) job.backend_env[cfg_.backend] = cfg_.backend_env;
  return job;
}

// Kernels are cached across candidates (the same fused kernel recurs), apart from the user's.
std::map<std::string, std::string> Oracle::cache_env() const {
  return {{"CRUCIBLE_CACHE_DIR", (cfg_.work_dir / "kernel_cache").string()}};
}

// Only the directories of the latest calls are kept, for a look after the fact (64 back: with
// --jobs up to 32, calls that old have finished).
void Oracle::forget_old_calls(int n) const {
  if (n > 64) fs::remove_all(cfg_.work_dir / fmt::format("call{:04d}", n - 64));
}

}  // namespace crucible::minify
