// Which values between packed convolutions (and the max pools among them) stay channels-last:
// oneDNN's brgemm kernels read and write NHWC as it lies, so a ResNet's convolutions pay no reorder
// between.
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

// An extern max_pool2d on f32 NCHW: it runs on NHWC (max_pool2d_nhwc) when its input and output
// both are.
bool nhwc_max_pool(const Graph& g, const Step& s) {
  if (s.kind != Step::Kind::kExtern || g.nodes()[s.node].op != "max_pool2d") return false;
  const TensorType& x = g.value(s.inputs[0]).type;
  return x.dtype == DType::kF32 && x.shape.size() == 4;
}

bool reads_nhwc(const Graph& g, const Step& s) {
  return dense_packed_conv(g, s) || nhwc_max_pool(g, s);
}

}  // namespace

void assign_conv_layouts(const Graph& g, std::vector<Step>& steps, const std::set<ValueId>& keep) {
  const size_t nv = g.values().size();
  // Start from every value a dense packed convolution writes, then drop the ones a constraint
  // rules out until none does: each drop only removes candidates, so this ends.
  std::vector<bool> nhwc(nv, false);
  for (const Step& s : steps) {
    if (reads_nhwc(g, s)) nhwc[s.outputs[0]] = true;
  }
  for (ValueId v : g.outputs()) nhwc[v] = false;
  for (ValueId v : keep) nhwc[v] = false;
  // Any reader but a dense packed convolution (its x or residual) or a max pool needs NCHW.
  std::vector<bool> read(nv, false);
  for (const Step& s : steps) {
    const bool flexible = reads_nhwc(g, s);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      read[s.inputs[k]] = true;
      if (!flexible) nhwc[s.inputs[k]] = false;
    }
  }
  for (size_t v = 0; v < nv; ++v) nhwc[v] = nhwc[v] && read[v];
  // The epilogue adds the residual element by element into y: both in one layout. A max pool
  // reads and writes one layout.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Step& s : steps) {
      const ValueId same = dense_packed_conv(g, s) ? s.residual
                           : nhwc_max_pool(g, s)   ? s.inputs[0]
                                                   : -1;
      if (same >= 0 && nhwc[s.outputs[0]] != nhwc[same]) {
        nhwc[s.outputs[0]] = nhwc[same] = false;
        changed = true;
      }
    }
  }
  for (Step& s : steps) {
    if (!reads_nhwc(g, s)) continue;
    s.x_channels_last = nhwc[s.inputs[0]];
    s.y_channels_last = nhwc[s.outputs[0]];
  }
}

}  // namespace crucible::codegen
