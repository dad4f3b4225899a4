// Everything `crucible run` was asked to do, after option parsing and validation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend_env.h"
#include "crucible/ops/training.h"
#include "suite.h"
#include "timing_settings.h"

namespace crucible {

struct RunConfig {
  std::vector<std::string> suites;
  std::vector<std::string> graphs;  // --graph FILE: ad-hoc models (.graph or .onnx)
  std::map<std::string, std::vector<int64_t>> shapes;  // --shape: ONNX inputs' symbolic dims
  // --input-data: TensorProto files bound, in order, to the inputs of the one --graph ONNX model.
  std::vector<std::string> input_files;
  ModelFilter filter;
  std::vector<std::string> backends;  // as given
  std::string mode = "accuracy";      // accuracy | performance | both | training | all
  // --mode training: each model's training graph (crucible/ops/training.h) of --train-steps steps
  // is judged for accuracy, and its one-step graph is timed. --mode all: both, and then training.
  TrainingOptions train;
  TimingSettings timing;  // what each timing worker is told
  int retry_noisy = 0;    // reruns of a model's timing while a result is noisy
  int processes = 1;      // timing workers per model (one after another), samples pooled
  std::string counters;   // "cachegrind": count each timed backend's calls under Valgrind
  bool bisect = false;    // minify each new accuracy failure after the run
  double timeout_s = 600;
  int64_t memory_limit_mb = 0;  // 0: none (the CLI defaults to 80% of RAM)
  int threads = 0;
  uint64_t seed = 0;
  std::string variant = "full";  // of built-in models: full | small
  int64_t batch_size = 0;        // overrides built-in models' batch size (0: theirs)
  std::filesystem::path db = "crucible.db";
  std::filesystem::path output_dir;  // "{run}" becomes the id; default: see output_dir.h
  std::string tag;
  bool verbose = false;  // whole errors under the result table, not their first lines
  std::map<std::string, std::string> config;  // -c (see backend_config.h for which backend)
  // --backend-env: set or unset while a worker loads that backend's plugin; the runner adds the
  // load-time environments the backends declare, chosen (load_env_choice.h), under what was given.
  BackendEnv backend_env;
  std::vector<std::string> plugin_paths;
  std::vector<std::string> suite_paths;
  std::string command_line;

  bool training() const { return mode == "training" || mode == "all"; }
  // Inference results (the forward graph as the model is): every mode but training.
  bool inference() const { return mode != "training"; }
  bool accuracy() const { return mode == "accuracy" || mode == "both" || training(); }
  bool performance() const { return mode == "performance" || mode == "both" || training(); }
};

}  // namespace crucible
