// Which values between packed convolutions (and the max pools among them) keep a channels-inner
// layout: oneDNN's direct kernels read and write NHWC (AVX-512 brgemm) or nChw8c (AVX2) as it lies,
// so a ResNet's convolutions pay no reorder between.
#include <algorithm>
#include <vector>

#include "crucible/ops/packed_conv.h"
#include "passes.h"

namespace crucible::codegen {

namespace {

// A packed convolution oneDNN runs (depthwise ones run our own loops).
bool dense_packed_conv(const Graph& g, const Step& s) {
  if (s.kind != Step::Kind::kPackedConv) return false;
  const Node& conv = g.nodes()[s.node];
  return !is_depthwise_conv(g.value(conv.operands[0]).type.shape[1],
                            conv.attrs.get_int_or("groups", 1));
}

// A 1x1 ungrouped convolution: oneDNN has a kernel for it on NCHW (`gemm:jit`) and on NHWC
// (`brgconv_1x1`) but reorders one side when they differ. An NCHW input is often the wide one
// (DenseNet's concatenated features, MobileNetV2's depthwise output before its projection), so
// such a convolution writes NCHW too; an NHWC input may end a chain in an NCHW output (ResNet's
// last convolution before its average pool).
bool pointwise_conv(const Graph& g, const Step& s) {
  if (!dense_packed_conv(g, s)) return false;
  const Node& conv = g.nodes()[s.node];
  const Shape& w = g.value(conv.operands[1]).type.shape;
  return conv.attrs.get_int_or("groups", 1) == 1 && w[2] == 1 && w[3] == 1;
}

// An extern max_pool2d on f32 NCHW: it runs on NHWC or nChw8c (max_pool_nhwc.h) when its input and
// output both are.
bool chain_max_pool(const Graph& g, const Step& s) {
  if (s.kind != Step::Kind::kExtern || g.nodes()[s.node].op != "max_pool2d") return false;
  const TensorType& x = g.value(s.inputs[0]).type;
  return x.dtype == DType::kF32 && x.shape.size() == 4;
}

// A packed depthwise convolution with one output channel per input channel: our channels-inner
// loop runs it when its input and output both are NHWC, or both nChw8c.
bool chain_depthwise(const Graph& g, const Step& s) {
  if (s.kind != Step::Kind::kPackedConv || dense_packed_conv(g, s)) return false;
  const Node& conv = g.nodes()[s.node];
  return g.value(conv.output).type.shape[1] == g.value(conv.operands[0]).type.shape[1];
}

bool reads_chain(const Graph& g, const Step& s) {
  return dense_packed_conv(g, s) || chain_max_pool(g, s) || chain_depthwise(g, s);
}

// Whether value v can lie in `chain`: nChw8c has no partial last block (PackedConv2d's rule).
bool fits_chain(const Graph& g, ValueId v, ActivationLayout chain) {
  const Shape& shape = g.value(v).type.shape;
  return chain != ActivationLayout::kNchw8c || (shape.size() == 4 && shape[1] % 8 == 0);
}

}  // namespace

void assign_conv_layouts(const Graph& g, std::vector<Step>& steps, const std::set<ValueId>& keep,
                         ActivationLayout chain) {
  const size_t nv = g.values().size();
  // Start from every value a chain-capable step writes, then drop the ones a constraint rules out
  // until none does: each drop only removes candidates, so this ends.
  std::vector<bool> in_chain(nv, false);
  for (const Step& s : steps) {
    if (reads_chain(g, s)) in_chain[s.outputs[0]] = fits_chain(g, s.outputs[0], chain);
  }
  for (ValueId v : g.outputs()) in_chain[v] = false;
  for (ValueId v : keep) in_chain[v] = false;
  // Any reader but a chain-capable step (a packed convolution's x or residual, a max pool's
  // input) needs NCHW.
  std::vector<bool> read(nv, false);
  for (const Step& s : steps) {
    const bool flexible = reads_chain(g, s);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      read[s.inputs[k]] = true;
      if (!flexible) in_chain[s.inputs[k]] = false;
    }
  }
  for (size_t v = 0; v < nv; ++v) in_chain[v] = in_chain[v] && read[v];
  // Pairs of values that must share a layout: a residual and the output it is added into element
  // by element; a max pool's or a depthwise convolution's input and output. And outputs that are
  // NCHW when an input is: a 1x1 convolution's.
  std::vector<std::pair<ValueId, ValueId>> same, follows;
  for (const Step& s : steps) {
    if (s.kind == Step::Kind::kPackedConv && s.residual >= 0)
      same.emplace_back(s.outputs[0], s.residual);
    if (chain_max_pool(g, s) || chain_depthwise(g, s)) same.emplace_back(s.outputs[0], s.inputs[0]);
    if (pointwise_conv(g, s)) follows.emplace_back(s.outputs[0], s.inputs[0]);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [a, b] : same) {
      if (in_chain[a] != in_chain[b]) {
        in_chain[a] = in_chain[b] = false;
        changed = true;
      }
    }
    for (const auto& [y, x] : follows) {
      if (in_chain[y] && !in_chain[x]) {
        in_chain[y] = false;
        changed = true;
      }
    }
  }
  for (Step& s : steps) {
    if (!reads_chain(g, s)) continue;
    s.x_layout = in_chain[s.inputs[0]] ? chain : ActivationLayout::kNchw;
    s.y_layout = in_chain[s.outputs[0]] ? chain : ActivationLayout::kNchw;
  }
}

}  // namespace crucible::codegen
