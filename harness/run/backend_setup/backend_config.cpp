// -c options scoped per backend, and each backend asked whether it can run here, takes them and
// what it declares (see backend_config.h).
#include "backend_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "crucible/core/error.h"
#include "crucible/core/option_scope.h"
#include "crucible/plugin_loader.h"
#include "temp_dir.h"
#include "worker_launch.h"

namespace crucible {

namespace fs = std::filesystem;

std::string backend_name(const std::string& backend) {
  const bool file =
      backend.find('/') != std::string::npos || fs::path(backend).extension() == ".so";
  return file ? backend_name_of(backend) : backend;
}

std::map<std::string, std::string> backend_config(const std::map<std::string, std::string>& config,
                                                  const std::string& backend) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : config) {
    if (const auto own = option_key_for(key, backend)) out[*own] = value;
  }
  return out;
}

WorkerJob pre_run_job(const RunConfig& cfg, const std::string& kind, const fs::path& graph,
                      const std::string& backend) {
  WorkerJob job;
  job.job = kind;
  job.graph = graph.string();
  job.suite = kind;
  job.model = kind;
  job.backends = {backend};
  job.seed = cfg.seed;
  job.threads = cfg.threads;
  job.plugin_paths = cfg.plugin_paths;
  job.config = cfg.config;
  job.backend_env = cfg.backend_env;
  return job;
}

namespace {
// The graph every options check compiles: one op every backend lowers.
constexpr const char* kCheckGraph =
    "graph crucible_options_check(%x: f32[4]) {\n  %y = neg(%x)\n  return %y\n}\n";
// An options check loads a plugin and compiles one op; a plugin that hangs is for the models'
// own results to show, not a reason to hold the run longer than this.
constexpr double kCheckTimeoutS = 120;
}  // namespace

Declarations ask_backends(const RunConfig& cfg,
                          const std::map<std::string, std::string>& load_errors) {
  Declarations declared;
  std::optional<TempDir> dir;
  for (size_t i = 0; i < cfg.backends.size(); ++i) {
    const std::string& b = cfg.backends[i];
    if (load_errors.contains(b)) continue;
    if (!dir) {
      dir.emplace("crucible_options_");
      std::ofstream(dir->path() / "check.graph") << kCheckGraph;
      fs::create_directories(dir->path() / "logs");
    }
    WorkerJob job = pre_run_job(cfg, "options", dir->path() / "check.graph", b);
    ChildLimits limits;
    limits.timeout_s = std::min(cfg.timeout_s > 0 ? cfg.timeout_s : kCheckTimeoutS, kCheckTimeoutS);
    limits.memory_limit_mb = cfg.memory_limit_mb;
    const WorkerRun run =
        run_worker(job, worker_files(dir->path(), fmt::format("options.{}", i)), {}, limits);
    if (const auto it = run.report.declarations.find(b); it != run.report.declarations.end())
      declared[b] = it->second;
    for (const reports::ResultRecord& r : run.results) {
      if (r.error.rfind(kBackendUnavailable, 0) == 0)
        throw Error(fmt::format("backend '{}' cannot run on this machine: {}", backend_name(b),
                                r.error.substr(kBackendUnavailable.size())));
      if (r.error.rfind(kOptionRefused, 0) == 0)
        throw Error(fmt::format("-c: backend '{}' refuses its options: {}", backend_name(b),
                                r.error.substr(kOptionRefused.size())));
    }
  }
  return declared;
}

}  // namespace crucible
