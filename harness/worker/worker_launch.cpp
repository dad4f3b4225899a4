// Starts one `crucible worker` and collects what it left (see worker_launch.h).
#include "worker_launch.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <sstream>
#include <system_error>

#include "crucible/core/error.h"
#include "crucible/core/kernel_cache_dir.h"
#include "crucible/plugin_loader.h"
#include "job_outcome.h"

namespace crucible {

namespace fs = std::filesystem;

namespace {

// `name` as the worker will see it: from `env` (added to this process's) or from this process.
std::string worker_env(const std::map<std::string, std::string>& env, const char* name) {
  if (auto it = env.find(name); it != env.end()) return it->second;
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path made_folder(const fs::path& dir) {
  fs::path abs = fs::absolute(dir).lexically_normal();
  std::error_code ec;
  fs::create_directories(abs, ec);
  if (ec)
    throw Error(fmt::format("{}: cannot make a worker's folder: {}", abs.string(), ec.message()));
  return abs;
}

// The kernel cache of the worker's backend: a folder of its own below the cache, named by the
// backend, so that no plugin plants code that another backend's next worker loads. Made as the
// codegen backend makes it (private: 0700) when it is missing; "" when none can be named (the
// backend then fails the same way).
fs::path kernel_cache(const std::map<std::string, std::string>& env, const WorkerJob& job) {
  fs::path dir = worker_env(env, "CRUCIBLE_CACHE_DIR");
  if (dir.empty()) {
    try {
      dir = default_kernel_cache_dir();
    } catch (const Error&) {
      return {};
    }
  }
  if (job.backends.size() == 1) {
    // A name, or a plugin's path (run-graph's): the same folder either way.
    const std::string& b = job.backends[0];
    const std::string name = b.find('/') != std::string::npos ? backend_name_of(b) : b;
    if (!name.empty() && name != "." && name != "..") dir /= name;
  }
  dir = fs::absolute(dir).lexically_normal();
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) == 0) ::chmod(dir.c_str(), 0700);
  return fs::is_directory(dir, ec) ? dir : fs::path();
}

}  // namespace

WorkerFiles worker_files(const fs::path& out, const std::string& label) {
  return {out / "reports" / label / "report", out / "logs" / (label + ".log")};
}

fs::path worker_tensors(const WorkerFiles& files) { return files.report.parent_path() / "tensors"; }

void allow_worker_writes(const WorkerJob& job, std::map<std::string, std::string>& env,
                         ChildLimits& limits) {
  std::vector<fs::path>& writable = limits.writable;
  if (!job.report.empty()) {
    const fs::path own = made_folder(fs::absolute(job.report).parent_path());
    writable.push_back(own);
    env["TMPDIR"] = made_folder(own / "tmp").string();
  }
  if (!job.tensors.empty())
    writable.push_back(made_folder(fs::absolute(job.tensors).parent_path()));
  if (const fs::path cache = kernel_cache(env, job); !cache.empty()) {
    writable.push_back(cache);
    env["CRUCIBLE_CACHE_DIR"] = cache.string();
  }
  // The plugin API's Options::debug_dir, as -c names it ("debug_dir" or "BACKEND:debug_dir").
  for (const auto& [key, value] : job.config) {
    const size_t colon = key.rfind(':');
    const std::string name = colon == std::string::npos ? key : key.substr(colon + 1);
    if (name == "debug_dir" && !value.empty()) writable.push_back(made_folder(value));
  }
  if (const std::string debug = worker_env(env, "CRUCIBLE_DEBUG"); !debug.empty() && debug != "0")
    writable.push_back(made_folder("crucible_debug"));
  // What the user lets every worker write besides (a plugin's state shared across its workers).
  std::istringstream extra(worker_env(env, kWorkerWritableEnv));
  for (std::string dir; std::getline(extra, dir, ':');) {
    if (!dir.empty()) writable.push_back(made_folder(dir));
  }
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec)) writable.emplace_back("/dev/shm");
}

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
  std::map<std::string, std::string> child_env = env;
  allow_worker_writes(job, child_env, worker_limits);
  w.outcome = run_child(argv, child_env, files.log, worker_limits, hooks);
  w.report = read_report(files.report);
  w.results = finalize_job(job, w.outcome, w.report, files.log, limits);
  return w;
}

}  // namespace crucible
