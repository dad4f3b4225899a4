// Which values between packed convolutions stay channels-last (NHWC): oneDNN's brgemm kernels read
// and write that layout as it lies, so a ResNet's convolutions pay no reorder between each other.
#include <algorithm>
#include <vector>

#include "passes.h"

namespace crucible::codegen {

namespace {

// A packed convolution oneDNN runs (depthwise ones run our NCHW loop).
bool dense_packed_conv(const Graph& g, const Step& s) {
  if (s.kind != Step::Kind::kPackedConv) return false;
  const Node& conv = g.nodes()[s.node];
  const int64_t groups = conv.attrs.get_int_or("groups", 1);
  return !(groups > 1 && groups == g.value(conv.operands[0]).type.shape[1]);
}

}  // namespace

void assign_conv_layouts(const Graph& g, std::vector<Step>& steps, const std::set<ValueId>& keep) {
  const size_t nv = g.values().size();
  // Start from every value a dense packed convolution writes, then drop the ones a constraint
  // rules out until none does: each drop only removes candidates, so this ends.
  std::vector<bool> nhwc(nv, false);
  for (const Step& s : steps) {
    if (dense_packed_conv(g, s)) nhwc[s.outputs[0]] = true;
  }
  for (ValueId v : g.outputs()) nhwc[v] = false;
  for (ValueId v : keep) nhwc[v] = false;
  // Any reader but a dense packed convolution's x or residual needs NCHW.
  std::vector<bool> read(nv, false);
  for (const Step& s : steps) {
    const bool conv = dense_packed_conv(g, s);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      read[s.inputs[k]] = true;
      if (!conv) nhwc[s.inputs[k]] = false;
    }
  }
  for (size_t v = 0; v < nv; ++v) nhwc[v] = nhwc[v] && read[v];
  // The epilogue adds the residual element by element into y: both in one layout.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Step& s : steps) {
      if (!dense_packed_conv(g, s) || s.residual < 0) continue;
      const ValueId y = s.outputs[0];
      if (nhwc[y] != nhwc[s.residual]) {
        nhwc[y] = nhwc[s.residual] = false;
        changed = true;
      }
    }
  }
  for (Step& s : steps) {
    if (!dense_packed_conv(g, s)) continue;
    s.x_channels_last = nhwc[s.inputs[0]];
    s.y_channels_last = nhwc[s.outputs[0]];
  }
}

}  // namespace crucible::codegen
