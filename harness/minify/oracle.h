// The minifier's oracle: runs a candidate through crucible's accuracy check as `run` does (the
// reference and the backend in workers of their own, the verdict here) and says whether it fails
// like the original.
// Verdicts are cached by the candidate's key, so a candidate seen before costs nothing.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend_env.h"
#include "candidate.h"
#include "signature.h"
#include "subprocess.h"
#include "worker.h"

namespace crucible::minify {

struct OracleConfig {
  std::string backend;
  std::map<std::string, std::string> config;  // -c, for the backend
  // Set or unset while the backend's plugin loads: --backend-env with the load-time environment
  // the backend declares (load_env_choice.h: a libtorch peer's BLAS core), chosen once, so every
  // candidate runs under the environment of the original.
  EnvChanges backend_env;
  std::vector<std::string> plugin_paths;
  double tolerance = 1e-4;
  bool cosine = false;
  bool scaled_tolerance = false;
  int threads = 0;
  ChildLimits limits;
  std::filesystem::path work_dir;  // candidates and worker logs go below it
};

struct Verdict {
  Signature signature;
  std::string error;  // the result's message, for the report
  std::string backend_version;
  bool cached = false;
};

class Oracle {
 public:
  explicit Oracle(OracleConfig config) : cfg_(std::move(config)) {}
  virtual ~Oracle() = default;

  // The candidate's verdict, from the cache when its key was tested before. Thread-safe.
  Verdict test(const Candidate& c);
  // The same, never from the cache (determinism checks, replays).
  Verdict run(const Candidate& c);
  // Per-node localization in one worker: the name of the first node whose backend value fails the
  // accuracy rule; "" when none does, the backend gives no intermediates, or the worker failed.
  virtual std::string localize(const Candidate& c);

  int calls() const { return calls_; }
  int cache_hits() const { return cache_hits_; }
  const OracleConfig& config() const { return cfg_; }

 protected:
  // One verdict, computed: here the accuracy job in a fresh worker. Tests of the reduction
  // algorithms override it with a predicate over the candidate graph.
  virtual Verdict evaluate(const Candidate& c, int call);
  int next_call() { return ++calls_; }

 private:
  // The directory of call `n`, holding `c` written out.
  std::filesystem::path prepare(const Candidate& c, int n) const;
  WorkerJob job_for(const std::string& kind, const std::filesystem::path& dir,
                    const Candidate& c) const;
  std::map<std::string, std::string> cache_env() const;
  void forget_old_calls(int n) const;

  OracleConfig cfg_;
  std::mutex cache_mutex_;  // test() may run on several threads (--jobs)
  std::map<std::string, Verdict> cache_;
  std::atomic<int> calls_{0}, cache_hits_{0};
};

}  // namespace crucible::minify
