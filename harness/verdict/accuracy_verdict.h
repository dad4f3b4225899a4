// The accuracy verdict on a backend's outputs: against eager and the fp64 reference by the
// accuracy rule, or against a test case's expected outputs by ONNX's. Reached in the parent, on
// tensors the plugin's process handed out, never in the process that loaded the plugin.
#pragma once

#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/reports/records.h"
#include "worker.h"

namespace crucible {

// What a backend's outputs are judged against, made where no plugin was loaded.
struct AccuracyReference {
  std::vector<Tensor> eager;       // eager's outputs, the same on two runs
  std::vector<Tensor> fp64;        // the graph widened to f64 (empty when not computed)
  std::vector<Tensor> expected;    // a test case's output_N.pb (empty without --expected)
  std::vector<std::string> names;  // the graph's output values' names, for messages (may be empty)
  // Eager on inputs moved by one f32 rounding (kSpreadRuns runs), for the outputs after an update
  // (outputs_after_an_update): the rule's yardstick there is the largest f32 error of them all.
  std::vector<std::vector<Tensor>> spread;
  std::vector<bool> after_update;  // per output; empty: none
};

// The f32 runs a reference makes for the outputs after an update: with eager's own, the rule's
// yardstick is the largest of 3 draws, where a ratio test against 1 draw of a chaotic output
// fails an honest backend about one time in five (x 3 on a scalar loss).
inline constexpr int kSpreadRuns = 2;

// Sets r's status (pass or fail_accuracy), error, accuracy figures and pass_suspicious from the
// outputs `res`, by the rule `job` carries (tolerance, cosine; expected with rtol, atol,
// fp64_check).
void judge_outputs(const WorkerJob& job, const AccuracyReference& ref,
                   const std::vector<Tensor>& res, reports::ResultRecord& r);

}  // namespace crucible
