// The child half of `crucible run-graph`: loads the plugin, compiles and runs the graph, and sends
// the exact text run-graph prints (and its exit status) back through the report as one reply.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <new>

#include "cli.h"
#include "crucible/core/block_cache.h"
#include "crucible/core/quote.h"
#include "crucible/ir/text_format.h"
#include "crucible/plugin_loader.h"
#include "tensor_summary.h"
#include "worker.h"
#include "worker_report.h"

namespace crucible {

namespace {

// run-graph's first line: the times, and the run's memory. Tensor storage counts what crucible's
// allocator handed out since the run began (a plugin's own allocations, such as ATen's, show only
// in the resident peak). The lines after it stay the same from run to run.
std::string timing_line(const std::string& graph, const std::string& file,
                        const plugin::BackendInfo& info, uint64_t seed,
                        std::chrono::steady_clock::duration compile,
                        std::chrono::steady_clock::duration run) {
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  return fmt::format(
      "graph {} ({}) on {} {}, seed {}, {} threads: compile {:.2f} ms, run {:.2f} ms, peak tensor "
      "storage {:.1f} MB, peak resident {:.1f} MB\n",
      graph, file, info.name, info.version, seed, omp_get_max_threads(), ms(compile), ms(run),
      static_cast<double>(storage_peak_bytes()) / (1 << 20), own_peak_rss_mb());
}

}  // namespace

int run_graph_job(const WorkerJob& job) {
  ReportWriter report(job.report);
  const std::string& file = job.graph;
  const std::string shown_file = escape_controls(file);  // in messages; the output keeps `file`
  const std::string& plugin_file = job.backends.at(0);
  auto reply = [&](int code, const std::string& out, const std::string& err) {
    report.reply(code, out, err);
    return code;
  };

  plugin::Options options;
  options.threads = job.threads;
  options.profile = job.profile;
  options.config = job.config;

  report.phase("load", plugin_file);
  Graph graph = load_graph_file(file);
  std::unique_ptr<LoadedBackend> loaded;
  // The backend's environment (a libtorch peer's BLAS core) while its plugin loads, as in a run.
  const auto env = job.backend_env.find(plugin_file);
  plugin::BackendInfo info;
  try {
    ScopedEnv scoped(env == job.backend_env.end() ? EnvChanges{} : env->second);
    loaded = load_plugin(plugin_file);
    info = loaded->backend().info();
  } catch (const PluginError& e) {
    return reply(cli::kExitUsage, "", fmt::format("crucible run-graph: {}\n", e.what()));
  }
  const std::string name = escape_controls(info.name);

  report.phase("compile", info.name);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<plugin::Executable> exe;
  try {
    exe = loaded->backend().compile(graph, options);
  } catch (const plugin::CompileError& e) {
    return reply(cli::kExitFailed, "",
                 fmt::format("crucible run-graph: {} failed to compile {}: {}\n", name, shown_file,
                             e.what()));
  } catch (const std::bad_alloc&) {
    return reply(
        cli::kExitFailed, "",
        fmt::format("crucible run-graph: {} ran out of memory compiling {}\n", name, shown_file));
  } catch (const std::exception& e) {
    return reply(cli::kExitFailed, "",
                 fmt::format("crucible run-graph: {} failed to compile {}: {}\n", name, shown_file,
                             escape_controls(e.what())));
  }
  auto t1 = std::chrono::steady_clock::now();
  info = loaded->backend().info();  // with what compile decided (the peer's oneDNN linears)
  std::vector<Tensor> inputs = make_inputs(graph, job.seed);
  report.phase("run", info.name);
  // The inputs and parameters are in use already: the peak counts them, as a training step's
  // memory does, and not what compile freed.
  storage_peak_reset();
  auto t2 = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs;
  try {
    outputs = exe->run(inputs);
  } catch (const std::bad_alloc&) {
    return reply(
        cli::kExitFailed, "",
        fmt::format("crucible run-graph: {} ran out of memory running {}\n", name, shown_file));
  } catch (const std::exception& e) {
    return reply(cli::kExitFailed, "",
                 fmt::format("crucible run-graph: {} failed to run {}: {}\n", name, shown_file,
                             escape_controls(e.what())));
  }
  auto t3 = std::chrono::steady_clock::now();

  std::string out = timing_line(graph.name(), file, info, job.seed, t1 - t0, t3 - t2);
  if (outputs.size() != graph.outputs().size()) {
    return reply(cli::kExitFailed, "",
                 fmt::format("crucible run-graph: {} returned {} outputs for {}, which has {}\n",
                             name, outputs.size(), shown_file, graph.outputs().size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    out += fmt::format("  output {} %{}: {}\n", i, graph.value(graph.outputs()[i]).name,
                       summarize_tensor(outputs[i]));
  }
  if (options.profile) {
    report.phase("profile", info.name);
    auto stats = exe->profile();
    std::sort(stats.begin(), stats.end(),
              [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
    out += fmt::format("  {:<32} {:>8} {:>12}\n", "kernel", "calls", "total ms");
    for (const auto& s : stats) {
      out += fmt::format("  {:<32} {:>8} {:>12.3f}\n", escape_controls(s.name), s.calls,
                         s.total_ns / 1e6);
    }
  }
  // Destructors (the executable's, the plugin's unload) still run after this: the parent checks
  // that the process then exits with this same status.
  report.phase("unload", info.name);
  return reply(cli::kExitOk, out, "");
}

}  // namespace crucible
