// `crucible worker`: the internal subcommand `crucible run` starts for each isolated job.
#include <fmt/format.h>

#include <sstream>

#include "cli.h"
#include "crucible/core/error.h"
#include "worker.h"

namespace crucible::cli {

int worker_command(const std::vector<std::string>& args) {
  WorkerJob job;
  std::vector<std::string> config, backend_env;
  std::string call_sets;
  po::options_description opts("worker options (internal: started by crucible run)");
  opts.add_options()(
      "job", po::value(&job.job)->required(),
      "reference | outputs | profile | timing | counters | cosim | run-graph | load-env-probe")(
      "graph", po::value(&job.graph)->required(), ".graph file")(
      "suite", po::value(&job.suite), "suite name")("model", po::value(&job.model)->required(),
                                                    "model name")(
      "batch-size", po::value(&job.batch_size), "batch size")(
      "backend", po::value(&job.backends)->required()->composing(), "backend (repeatable)")(
      "seed", po::value(&job.seed), "input seed")(
      "threads", po::value(&job.threads), "OpenMP threads")("tolerance", po::value(&job.tolerance),
                                                            "accuracy tolerance")(
      "cosine", po::bool_switch(&job.cosine), "cosine-similarity accuracy")(
      "scaled-tolerance", po::bool_switch(&job.scaled_tolerance),
      "atol relative to the outputs' scale")("tensors", po::value(&job.tensors),
                                             "reference/outputs: the tensor file to write")(
      "no-fp64", po::bool_switch(), "reference: no fp64 reference")(
      "eager-once", po::bool_switch(&job.eager_once), "reference: one eager run")(
      "profile", po::bool_switch(&job.profile), "run-graph: per-kernel timings")(
      "turns", po::bool_switch(&job.turns), "timing: take turns with the parent on fd 3")(
      "secret", po::value(&job.secret), "timing, reference: the audit's secret")(
      "timing-sets", po::bool_switch(&job.timing_sets), "reference: also the timing's set B")(
      "call-sets", po::value(&call_sets), "reference: and these timed calls (id,id,...)")(
      "verify-secret", po::value(&job.verify_secret), "reference: of the calls' sampled elements")(
      "budget-s", po::value(&job.budget_s), "timing: the worker's time, split among backends")(
      "report", po::value(&job.report)->required(), "report file")(
      "plugin-path", po::value(&job.plugin_paths)->composing(), "plugin directories")(
      "config,c", po::value(&config)->composing(), "backend option key=value")(
      "backend-env", po::value(&backend_env)->composing(),
      "BACKEND:KEY=VALUE or BACKEND:-KEY, applied while that backend loads");
  add_timing_options(opts, job.timing);  // as run declared them (timing_settings.h)
  po::variables_map vm;
  if (!parse("worker", "--job J --graph F --model M --backend B --report FILE ...", opts, {}, args,
             vm))
    return kExitOk;
  job.want_fp64 = !vm["no-fp64"].as<bool>();
  std::stringstream ids(call_sets);
  for (std::string id; std::getline(ids, id, ',');) {
    try {
      size_t end = 0;
      job.call_sets.push_back(std::stoull(id, &end));
      if (end != id.size()) throw std::invalid_argument(id);
    } catch (const std::exception&) {
      throw po::error(fmt::format("--call-sets: '{}' is not a call id", id));
    }
  }
  job.config = parse_config(config);
  try {
    job.backend_env = parse_backend_env(backend_env);
  } catch (const Error& e) {
    throw po::error(e.what());
  }
  return run_worker_job(job);
}

}  // namespace crucible::cli
