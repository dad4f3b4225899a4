// Suites: a manifest (suites/<name>/suite.manifest) lists models with their graph, batch size,
// tolerance and skip/xfail reasons. This file reads manifests and selects models for a run.
#pragma once

#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace crucible {

// What a manifest says of a model's training step (the `train_*` keys), applied when the run trains
// it (as_training_entry, training_models.h). PyTorch's harness keeps the same facts per model:
// training batch sizes of their own, models whose training is skipped or known to fail.
struct TrainingEntry {
  std::string skip;        // non-empty: its training is not run, recorded as skipped with this
  std::string xfail;       // non-empty: its training is expected to fail
  int64_t batch_size = 0;  // 0: the model's batch_size, else a builtin's training default
  double tolerance = 0;    // 0: the training rule's (kTrainingTolerance, or the model's if larger)
};

struct ModelEntry {
  std::string suite;
  std::string name;
  std::filesystem::path graph;  // absolute path of the .graph file (set at run time for builtins)
  // Under --mode training: the one-step training graph that performance times (set at run time;
  // empty: performance times `graph`).
  std::filesystem::path step_graph;
  std::string builtin;         // a model of the built-in zoo (crucible/models), instead of graph
  std::filesystem::path onnx;  // an ONNX model imported at run time, instead of graph
  std::filesystem::path onnx_data;  // its test case: input_N.pb as inputs, output_N.pb expected
  std::vector<std::filesystem::path> input_files;  // --input-data: its inputs' data, in order
  double rtol = 1e-3, atol = 1e-7;  // against output_N.pb (ONNX's backend-test tolerances)
  bool fp64_check = false;          // also hold eager to the fp64 reference (within tolerance)
  int64_t batch_size = 0;           // 0: the model's default (builtins) or the first input's dim 0
  int64_t image_size = 0;           // builtin vision models: the images' side (0: the variant's)
  double tolerance = 1e-4;
  bool tolerance_set = false;  // given in the manifest (overrides a builtin's own)
  bool cosine = false;
  bool scaled_tolerance = false;  // set at run time for training steps (training_models.h)
  std::string skip;               // non-empty: not run, recorded as skipped with this reason
  std::string xfail;              // non-empty: expected to fail; a failure is recorded as xfail
  TrainingEntry train;            // the manifest's train_* keys
  bool training = false;          // this entry is the model's training step (<model>.train)
  std::string import_error;       // set at run time: the ONNX model did not import (fail_to_load)
};

struct Suite {
  std::string name;
  std::filesystem::path manifest;
  std::vector<ModelEntry> models;
};

// Parses a manifest. Lines: `model NAME graph=FILE|builtin=MODEL|onnx=FILE [data=DIR]
// [batch_size=N] [tolerance=X] [cosine=true] [skip="why"] [xfail="why"] [train_batch_size=N]
// [train_tolerance=X] [train_skip="why"] [train_xfail="why"]`, and `onnx_cases DIR
// [rtol=X] [atol=X] [fp64=true]`: one model per folder of DIR holding model.onnx and
// test_data_set_0 (ONNX's backend tests; DIR may use ${VAR}, ${VAR:-default} and ~/);
// '#' starts a comment; paths are relative to the manifest. A builtin model takes its
// tolerance from the zoo unless the line sets one. Errors: "file:line:col: what".
Suite parse_suite(const std::string& text, const std::filesystem::path& manifest);
Suite load_suite_file(const std::filesystem::path& manifest);

// Directories searched for suites: --suite-path entries, CRUCIBLE_SUITE_PATH, the install tree's
// share/crucible/suites, and the source tree's suites/ (for the build tree).
std::vector<std::filesystem::path> suite_search_path(const std::vector<std::string>& extra);
// A suite by name (<dir>/<name>/suite.manifest) or by manifest path. Throws Error listing where it
// looked.
Suite find_suite(const std::string& name_or_path, const std::vector<std::filesystem::path>& dirs);

struct ModelFilter {
  std::vector<std::string> only;      // exact names; empty: all
  std::optional<std::regex> include;  // --filter
  std::optional<std::regex> exclude;  // --exclude
  int shard_index = 0;                // --shard I/N, 0-based
  int shard_count = 1;
};
// Parses "I/N" (0 <= I < N); throws Error otherwise.
void parse_shard(const std::string& spec, ModelFilter& filter);
// Models of the suites that pass the filter, in suite order then manifest order; sharding counts
// the filtered list round-robin so shards stay balanced. An --only name that matches nothing is an
// Error.
std::vector<ModelEntry> select_models(const std::vector<Suite>& suites, const ModelFilter& filter);

}  // namespace crucible
