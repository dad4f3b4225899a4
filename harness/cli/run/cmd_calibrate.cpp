// `crucible calibrate`: A/A runs. The same build times a suite on one backend --runs times, and
// each model's run-to-run noise (CV of the runs' medians, of their instruction counts, the spread
// of speed-ups) is printed and stored, so the regression detector knows each series' noise.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/core/quote.h"
#include "crucible/reports/store.h"
#include "launcher.h"
#include "output_dir.h"
#include "runner.h"

namespace crucible::cli {

namespace {

// CV of `v` (NaN with fewer than two values).
double cv_of(const std::vector<double>& v) { return v.size() < 2 ? NAN : reports::summarize(v).cv; }

struct Series {
  std::vector<double> medians, within_cv, instructions, speedups;
  int noisy = 0;
};

}  // namespace

int calibrate_command(const std::vector<std::string>& args) {
  RunConfig cfg;
  LaunchOptions launch;
  int runs = 5;
  std::string backend;
  po::options_description own("calibration");
  own.add_options()("runs", po::value(&runs)->default_value(5),
                    "timing runs of the same build (at least 2)")(
      "backend", po::value(&backend),
      "the backend to calibrate, required (eager is timed beside it as the speed-up baseline)");
  const auto preset = [&](RunConfig& c) {
    // No backend is the default: which one a user calibrates is theirs to say.
    if (backend.empty()) throw po::error("calibrate needs --backend B, the backend to calibrate");
    c.mode = "performance";
    c.backends = {backend};
  };
  if (!parse_run_options("calibrate",
                         "--suite S --backend B --runs N [run options but --backends, --mode and "
                         "the CPU launcher's]",
                         own, args, cfg, launch, {"backends", "mode"}, preset)) {
    return kExitOk;
  }
  if (runs < 2) throw po::error("--runs must be at least 2");
  if (launch.requested()) {
    throw po::error(
        "calibrate takes no launcher options; start it under the launch `crucible run "
        "--dry-run` prints");
  }
  if (cfg.tag.empty()) cfg.tag = "calibrate";
  // Each of its runs writes a folder of its own under the one given.
  if (!cfg.output_dir.empty() && !has_run_placeholder(cfg.output_dir.string()))
    cfg.output_dir /= "run_{run}";
  prepare_local_run(cfg);

  std::vector<int64_t> run_ids;
  for (int i = 0; i < runs; ++i) {
    std::cerr << fmt::format("calibrate: run {} of {}\n", i + 1, runs);
    int64_t id = 0;
    const int status = execute_run(cfg, &id);
    if (status != kExitOk && status != kExitFailed) return status;  // interrupted
    run_ids.push_back(id);
  }

  auto store = reports::Store::open(cfg.db);
  std::map<std::pair<std::string, std::string>, std::map<std::string, Series>> by_model;
  for (int64_t id : run_ids) {
    for (const auto& r : store->results(id)) {
      if (r.mode != "performance" || r.status != reports::Status::kPass || r.samples_ms.empty())
        continue;
      Series& s = by_model[{r.suite, r.model}][r.backend];
      s.medians.push_back(r.stats.median);
      s.within_cv.push_back(r.stats.cv);
      if (r.instructions_median) s.instructions.push_back(*r.instructions_median);
      if (r.speedup) s.speedups.push_back(*r.speedup);
      s.noisy += r.noisy ? 1 : 0;
    }
  }
  std::string ids;
  for (int64_t id : run_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  std::cout << fmt::format("{:<36} {:<10} {:>5} {:>10} {:>8} {:>9} {:>8} {:>20} {:>6}\n", "model",
                           "backend", "runs", "median ms", "time cv", "within cv", "instr cv",
                           "speed-up min/med/max", "noisy");
  for (const auto& [key, backends] : by_model) {
    for (const auto& [b, s] : backends) {
      reports::Calibration c;
      c.suite = key.first;
      c.model = key.second;
      c.backend = b;
      c.runs = static_cast<int>(s.medians.size());
      c.run_ids = ids;
      c.median_ms = reports::median(s.medians);
      c.time_cv = cv_of(s.medians);
      c.within_run_cv = reports::median(s.within_cv);
      if (s.instructions.size() >= 2) c.instructions_cv = cv_of(s.instructions);
      if (b != "eager" && !s.speedups.empty()) {
        c.speedup_median = reports::median(s.speedups);
        c.speedup_min = *std::min_element(s.speedups.begin(), s.speedups.end());
        c.speedup_max = *std::max_element(s.speedups.begin(), s.speedups.end());
      }
      c.noisy_runs = s.noisy;
      store->add_calibration(c);
      auto pct = [](double v) { return std::isfinite(v) ? fmt::format("{:.2f}%", 100 * v) : "-"; };
      std::cout << fmt::format(
          "{:<36} {:<10} {:>5} {:>10.4f} {:>8} {:>9} {:>8} {:>20} {:>6}\n",
          escape_controls(c.suite + "/" + c.model), escape_controls(b), c.runs, c.median_ms,
          pct(c.time_cv), pct(c.within_run_cv), c.instructions_cv ? pct(*c.instructions_cv) : "-",
          c.speedup_median ? fmt::format("{:.2f}/{:.2f}/{:.2f}x", *c.speedup_min, *c.speedup_median,
                                         *c.speedup_max)
                           : "-",
          c.noisy_runs);
    }
  }
  std::cout << fmt::format("calibration of runs {} recorded in {}\n", ids, cfg.db.string());
  return kExitOk;
}

}  // namespace crucible::cli
