// What every worker job shares: the job, its report, the loaded model and its seeded inputs, and
// `attempt`, which turns a backend's exception into a status on its result.
#pragma once

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend_config.h"
#include "crucible/ir/transforms.h"
#include "crucible/plugin_loader.h"
#include "worker.h"
#include "worker_report.h"

namespace crucible {

struct Session {
  const WorkerJob& job;
  ReportWriter report;
  Graph graph;
  std::vector<Tensor> inputs;

  explicit Session(const WorkerJob& j) : job(j), report(j.report) {}

  reports::ResultRecord record(const std::string& backend, const std::string& mode) const {
    return reports::make_result(job.suite, job.model, backend, mode, job.batch_size);
  }

  // The backend's --backend-env is in effect while its plugin loads (OpenBLAS, which libtorch
  // loads, reads its variables then) and while it says its version, then undone, so the other
  // backends of the worker see the environment as it was.
  std::unique_ptr<LoadedBackend> load(const std::string& name) {
    const auto env = job.backend_env.find(name);
    ScopedEnv scoped(env == job.backend_env.end() ? EnvChanges{} : env->second);
    auto loaded = load_plugin(find_plugin(name, plugin_search_path(job.plugin_paths)));
    report.loaded(name, loaded->backend().info().version);
    return loaded;
  }

  // The graph compiled on `be` (loaded as `name`) with the job's options. A plugin may say in its
  // version what compile decided (the libtorch peer's oneDNN linears, -c linear=auto), so the
  // version is reported again after it: the result keeps the latest.
  std::unique_ptr<plugin::Executable> compile(LoadedBackend& be, const std::string& name,
                                              bool profile) {
    auto exe = be.backend().compile(graph, options(name, profile));
    report.loaded(name, be.backend().info().version);
    return exe;
  }

  // The fp64 reference: the graph and `inputs` widened to f64, run on `eager`.
  std::vector<Tensor> fp64_reference(LoadedBackend& eager,
                                     const std::vector<Tensor>& inputs) const {
    return eager.backend()
        .compile(widen_to_f64(graph), options("eager", false))
        ->run(widen_inputs_to_f64(inputs));
  }

  plugin::Options options(const std::string& backend, bool profile) const {
    plugin::Options o;
    o.threads = job.threads;
    o.profile = profile;
    o.config = backend_config(job.config, backend);
    return o;
  }
};

// Runs `body`; any exception becomes (status, message) in `r`. Returns true on success.
// std::bad_alloc is rethrown: run_worker_job turns it into the worker's oom exit.
template <typename F>
bool attempt(reports::ResultRecord& r, reports::Status status, F&& body) {
  try {
    body();
    return true;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    r.status = status;
    r.error = e.what();
  } catch (...) {
    r.status = status;
    r.error = "unknown exception";
  }
  return false;
}

// The minifier's per-node localization (minify/cosim/cosim_job.cpp).
void cosim_job(Session& s);

// One candidate load-time environment of a backend, checked and timed (load_env_probe_job.cpp).
void load_env_probe_job(Session& s);

// Whether the backend can run on this machine and takes the job's -c options (options_job.cpp;
// kBackendUnavailable and kOptionRefused, worker.h).
void options_job(Session& s);

// `crucible run --counters cachegrind`'s job, under callgrind (counters_job.cpp).
void counters_job(Session& s);

class PerfCounters;
// The timing job (timing_job.cpp); `counters` were opened before any backend was loaded.
void timing_job(Session& s, PerfCounters& counters);

}  // namespace crucible
