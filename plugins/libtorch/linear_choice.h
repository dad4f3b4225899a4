// -c linear=aten|mkldnn|auto: which f32 linears of a graph the peer sends through oneDNN
// (mkldnn_linear.h) rather than ATen's BLAS linear; auto (the default) decides per shape by timing.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::libtorch {

enum class LinearSetting { kAten, kMkldnn, kAuto };

// "aten" (or its old name "default"), "mkldnn", "auto"; nullopt for anything else.
std::optional<LinearSetting> parse_linear_setting(const std::string& value);

struct LinearPlan {
  std::set<size_t> onednn_nodes;  // node indices whose linear goes through oneDNN
  // auto's line for the version string: "linear auto: mkldnn for 3 of 4 shapes (...)"; "" else.
  std::string summary;
};

// aten: no node; mkldnn: every linear oneDNN takes (takes_mkldnn_linear); auto: for each distinct
// (rows, in_features, out_features, bias) of the linears whose weight (and bias) are parameters,
// ATen's linear and oneDNN's are run on the real weights (`params`, in graph parameter order) and a
// deterministic input on `threads` threads, oneDNN's result is checked against ATen's within the
// rounding bound of an f32 dot product of that length, and the faster correct one is taken.
// Shapes too small to matter, and those left once the probe's time budget is spent, stay on ATen.
// Decisions are kept for the process and in the kernel cache folder (keyed by shape and threads),
// so a second compile of the same graph (the warm compile, the profiled one, the timing worker's
// in the same folder) takes the same paths without timing again.
LinearPlan plan_linears(const Graph& g, const std::vector<at::Tensor>& params,
                        LinearSetting setting, int threads);

}  // namespace crucible::libtorch
