// The minifier's driver: lock the failure's signature, make sure it reproduces, reduce the graph
// to a fixpoint of the delta passes, replay the result in fresh workers and write the repro.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "oracle.h"
#include "pass_bisect.h"
#include "repro.h"

namespace crucible::minify {

struct MinifyOptions {
  OracleConfig oracle;          // what the repro records: backend, options, tolerance
  std::string want;             // --signature: auto | accuracy | compile | crash | timeout
  int determinism = 3;          // reproductions of the original before any reduction
  int replays = 5;              // reruns of the result, in fresh workers, before it is written
  bool cosim = true;            // accuracy failures: localize the first diverging node first
  bool bisect = true;           // bisect the minimized graph to a kernel and a pass
  plugin::Bisection bisection;  // as the backend declares it (none: nothing to bisect)
  int jobs = 1;                 // candidates tested at once (each in its own worker)
  std::filesystem::path out;    // the repro directory
  std::string original;         // where the graph came from, for the manifest
  uint64_t seed = 0;            // the seed its inputs and parameters were drawn with
  std::function<void(const std::string&)> progress;  // one line of progress at a time
};

struct MinifyResult {
  enum class Outcome { kMinimized, kNoFailure, kFlaky, kOtherFailure, kNotReproduced };
  Outcome outcome = Outcome::kNoFailure;
  Signature signature;
  std::string backend_version;  // what the backend's plugin said of itself
  std::string message;          // what to tell the user, one line
  int original_failures = 0;    // of `determinism` runs, how many failed with the locked signature
  int nodes_before = 0, nodes_after = 0, compute_nodes_after = 0;
  int oracle_calls = 0, cache_hits = 0, flipped = 0;
  int replays_ok = 0;
  std::string cosim_node;  // the node per-node localization blamed ("" when none or not asked)
  bool cosim_cut = false;  // and cutting to it kept the failure
  Culprit culprit;         // when the backend declares a bisection
  double wall_s = 0;
};

// The store's row for a minification of (suite, model); `path` is the repro directory, if written.
reports::ReproRecord repro_record(const MinifyResult& r, const MinifyOptions& opts,
                                  const std::string& suite, const std::string& model);

// `g` with `inputs` (the run's seeded inputs, parameters already reseeded), judged by `oracle`.
MinifyResult minify(const Graph& g, const std::vector<Tensor>& inputs, Oracle& oracle,
                    const MinifyOptions& opts);

}  // namespace crucible::minify
