// -c clamp=auto|safe|native: how jit mode writes a float clamp with two bounds (ReLU6). auto, the
// default, checks PyTorch's own form against the safe one on the graph and times both.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten_ops.h"
#include "crucible/ir/graph.h"
#include "torchscript.h"

namespace crucible::libtorch {

enum class ClampSetting { kSafe, kNative, kAuto };

// "safe", "native", "auto"; nullopt for anything else.
std::optional<ClampSetting> parse_clamp_setting(const std::string& value);

struct ClampChoice {
  std::unique_ptr<ScriptedGraph> scripted;
  bool native = false;
  // auto's line for the version string: "clamp auto: native 41.2 ms, safe 112.9 ms (outputs
  // agree)"; "" when the setting was given or the graph has no clamp the forms write apart.
  std::string summary;
};

// The graph scripted as `setting` asks (style.native_clamp set to match). auto, where the graph
// has a float clamp with two bounds: a user writes torch.hardtanh (nn.ReLU6), which
// optimize_for_inference fuses into the convolution before it, 2.4x faster on MobileNetV2 than
// clamp_min + clamp_max, whose every clamp sends the convolution's output out of oneDNN's layout
// and back; but PyTorch 1.13 leaves elements unclamped when the channels are not a multiple of
// oneDNN's block. Both forms are compiled and run on one deterministic input whose values cross
// both bounds; PyTorch's form is taken when its outputs agree with the safe form's (up to f32
// rounding of the rest of the graph) and its median over alternating calls is lower. Decisions are
// kept for the process and in the kernel cache folder (keyed by the safe source and the threads),
// so the profile and timing workers of a model script it the same way.
ClampChoice script_with_clamp(const Graph& g, const std::vector<at::Tensor>& params,
                              bool optimize_for_inference, ScriptStyle style, ClampSetting setting,
                              int threads, const std::filesystem::path& debug_dir);

}  // namespace crucible::libtorch
