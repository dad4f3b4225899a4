// The worker-backed oracle (see oracle.h).
#include "oracle.h"

#include <fmt/format.h>

#include "job_outcome.h"
#include "worker.h"
#include "worker_report.h"

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
  const Launched l = launch("accuracy", c, n);
  Verdict v;
  if (!l.results.empty()) {
    v.signature = signature_of(l.results.front());
    v.error = l.results.front().error;
    v.backend_version = l.results.front().backend_version;
  }
  return v;
}

std::string Oracle::localize(const Candidate& c) {
  const Launched l = launch("cosim", c, next_call());
  if (!l.report.reply || l.report.reply->exit_code != 0) return "";
  const std::string& out = l.report.reply->out;
  return out.rfind("node ", 0) == 0 ? out.substr(5) : "";
}

Oracle::Launched Oracle::launch(const std::string& kind, const Candidate& c, int n) {
  const fs::path dir = cfg_.work_dir / fmt::format("call{:04d}", n);
  fs::remove_all(dir);
  c.write(dir);
  WorkerJob job;
  job.job = kind;
  job.graph = (dir / "graph.graph").string();
  job.suite = "minify";
  job.model = c.graph.name();
  job.backends = {cfg_.backend};
  job.threads = cfg_.threads;
  job.tolerance = cfg_.tolerance;
  job.cosine = cfg_.cosine;
  job.plugin_paths = cfg_.plugin_paths;
  job.config = cfg_.config;
  if (!cfg_.backend_env.empty()) job.backend_env[cfg_.backend] = cfg_.backend_env;
  job.report = (dir / "worker.report").string();
  std::vector<std::string> argv{self_executable().string()};
  for (auto& a : job.to_args()) argv.push_back(a);
  // Kernels are cached across candidates (the same fused kernel recurs), apart from the user's.
  const std::map<std::string, std::string> env{
      {"CRUCIBLE_CACHE_DIR", (cfg_.work_dir / "kernel_cache").string()}};
  const fs::path log = dir / "worker.log";
  const ChildOutcome outcome = run_child(argv, env, log, cfg_.limits);
  Launched l;
  l.report = read_report(job.report);
  if (kind != "cosim") l.results = finalize_job(job, outcome, l.report, log, cfg_.limits);
  // Only the directories of the latest calls are kept, for a look after the fact.
  // (64 back: with --jobs up to 32, calls that old have finished.)
  if (n > 64) fs::remove_all(cfg_.work_dir / fmt::format("call{:04d}", n - 64));
  return l;
}

}  // namespace crucible::minify
