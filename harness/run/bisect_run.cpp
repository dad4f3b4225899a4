// run --bisect: minify each new accuracy failure of the run (see bisect_run.h).
#include "bisect_run.h"

#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "crucible/core/quote.h"
#include "crucible/ir/text_format.h"
#include "minify/minify.h"
#include "training_models.h"

namespace crucible {

namespace fs = std::filesystem;
using reports::Status;

namespace {

// The failures a minifier can chase: the backend's own, not the reference's or the harness's.
bool minifiable(Status s) {
  return s == Status::kFailAccuracy || s == Status::kFailToCompile || s == Status::kFailToRun ||
         s == Status::kCrash || s == Status::kTimeout;
}

}  // namespace

void bisect_new_failures(const RunConfig& cfg, reports::Store& store, int64_t run_id,
                         const std::vector<ModelEntry>& models,
                         const std::vector<reports::ResultRecord>& results,
                         const fs::path& out_dir) {
  for (const reports::ResultRecord& r : results) {
    if (r.mode != "accuracy" || r.backend == "eager" || !minifiable(r.status)) continue;
    const std::string status(reports::status_name(r.status));
    const auto before = store.previous_status(r.suite, r.model, r.backend, r.mode, run_id);
    const std::string label = fmt::format("{}/{} on {}", escape_controls(r.suite),
                                          escape_controls(r.model), escape_controls(r.backend));
    if (before == status) {
      std::cerr << fmt::format("bisect: {}: {} already in an earlier run, not minified\n", label,
                               status);
      continue;
    }
    std::optional<ModelEntry> m;
    for (const ModelEntry& e : models) {
      if (e.suite != r.suite || e.name != r.model) continue;
      m = e;
      // A training entry's failure was judged on the training graph the runner wrote.
      if (e.training) m->graph = training_graph_path(out_dir / "graphs", *m);
    }
    if (!m) continue;
    minify::MinifyOptions mo;
    mo.oracle.backend = r.backend;
    mo.oracle.config = cfg.config;
    // The run's environment for the backend, with the BLAS core its failure was found under.
    if (auto env = cfg.backend_env.find(r.backend); env != cfg.backend_env.end())
      mo.oracle.backend_env = env->second;
    mo.oracle.plugin_paths = cfg.plugin_paths;
    mo.oracle.tolerance = m->tolerance;
    mo.oracle.cosine = m->cosine;
    mo.oracle.scaled_tolerance = m->scaled_tolerance;
    mo.oracle.threads = cfg.threads;
    mo.oracle.limits.timeout_s = cfg.timeout_s;
    mo.oracle.limits.memory_limit_mb = cfg.memory_limit_mb;
    mo.oracle.work_dir = out_dir / "bisect" / fmt::format("{}.{}.work", r.model, r.backend);
    mo.out = out_dir / "repros" / fmt::format("{}.{}", r.model, r.backend);
    mo.original = fmt::format("run {} --suite {} --only {}", run_id, r.suite, r.model);
    mo.seed = cfg.seed;
    mo.progress = [&](const std::string& line) {
      std::cerr << fmt::format("bisect: {}: {}\n", label, line);
    };
    minify::MinifyResult res;
    try {
      Graph g = load_graph_file(m->graph);
      reseed_params(g, cfg.seed);
      minify::Oracle oracle(mo.oracle);
      res = minify::minify(g, make_inputs(g, cfg.seed), oracle, mo);
    } catch (const std::exception& e) {
      std::cerr << fmt::format("bisect: {}: cannot minify: {}\n", label, e.what());
      continue;
    }
    fs::remove_all(mo.oracle.work_dir);
    reports::ReproRecord rec = minify::repro_record(res, mo, r.suite, r.model);
    rec.run_id = run_id;
    store.add_repro(rec);
    std::cerr << fmt::format("bisect: {}: {}{}\n", label, res.message,
                             rec.path.empty() ? "" : "; repro in " + rec.path);
  }
}

}  // namespace crucible
