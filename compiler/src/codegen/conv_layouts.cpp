// Which values between packed convolutions (and the max pools, pointwise kernels and global pools
// among them) keep a channels-inner layout: oneDNN's direct kernels read and write NHWC (AVX-512
// brgemm) or nChw8c (AVX2) as it lies, so a ResNet's convolutions pay no reorder between.
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

// A step that can read, and (but for a spatial reduction, whose result lies alike in every
// layout) write, values in the chain layout.
struct ChainRole {
  bool conv_or_pool = false;  // a dense or depthwise packed convolution, or a max pool
  bool pointwise = false;     // is_chain_pointwise
  bool reduction = false;     // is_chain_spatial_reduction
  bool any() const { return conv_or_pool || pointwise || reduction; }
};

ChainRole role_of(const Graph& g, const LoopProgram& lp, const Step& s, size_t i, bool kernels) {
  ChainRole r;
  r.conv_or_pool = dense_packed_conv(g, s) || chain_max_pool(g, s) || chain_depthwise(g, s);
  if (kernels && s.kind == Step::Kind::kKernel) {
    r.pointwise = is_chain_pointwise(g, lp, lp.groups[i]);
    r.reduction = is_chain_spatial_reduction(g, lp, lp.groups[i]);
  }
  return r;
}

// Whether value v can lie in `chain`: nChw8c has no partial last block (PackedConv2d's rule).
bool fits_chain(const Graph& g, ValueId v, ActivationLayout chain) {
  const Shape& shape = g.value(v).type.shape;
  return chain != ActivationLayout::kNchw8c || (shape.size() == 4 && shape[1] % 8 == 0);
}

}  // namespace

void assign_conv_layouts(const Graph& g, const LoopProgram& lp, std::vector<Step>& steps,
                         const std::set<ValueId>& keep, ActivationLayout chain, bool kernels) {
  const size_t nv = g.values().size();
  std::vector<ChainRole> roles;
  for (size_t i = 0; i < steps.size(); ++i) roles.push_back(role_of(g, lp, steps[i], i, kernels));
  // Start from every value a chain-capable step writes, then drop the ones a constraint rules out
  // until none does: each drop only removes candidates, so this ends.
  std::vector<bool> in_chain(nv, false);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (ValueId v : steps[i].outputs) {
      if (roles[i].conv_or_pool ||
          (roles[i].pointwise && spans_chain_pointwise(g, lp.groups[i], v)))
        in_chain[v] = fits_chain(g, v, chain);
    }
  }
  for (ValueId v : g.outputs()) in_chain[v] = false;
  for (ValueId v : keep) in_chain[v] = false;
  // Any other reader (a view, an extern call, another kernel; a pointwise kernel's gate) needs
  // NCHW.
  std::vector<bool> read(nv, false);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      read[s.inputs[k]] = true;
      const bool flexible =
          roles[i].conv_or_pool || (roles[i].reduction && k == 0) ||
          (roles[i].pointwise && spans_chain_pointwise(g, lp.groups[i], s.inputs[k]));
      if (!flexible) in_chain[s.inputs[k]] = false;
    }
  }
  for (size_t v = 0; v < nv; ++v) in_chain[v] = in_chain[v] && read[v];
  // Pairs of values that must share a layout: a residual and the output it is added into element
  // by element; a max pool's or a depthwise convolution's input and output; the values a pointwise
  // kernel spans. And outputs that are NCHW when an input is: a 1x1 convolution's.
  std::vector<std::pair<ValueId, ValueId>> same, follows;
  std::vector<ValueId> spanned(steps.size(), -1);  // per pointwise kernel: a value it spans
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind == Step::Kind::kPackedConv && s.residual >= 0)
      same.emplace_back(s.outputs[0], s.residual);
    if (chain_max_pool(g, s) || chain_depthwise(g, s)) same.emplace_back(s.outputs[0], s.inputs[0]);
    if (pointwise_conv(g, s)) follows.emplace_back(s.outputs[0], s.inputs[0]);
    if (!roles[i].pointwise) continue;
    for (const auto* values : {&s.inputs, &s.outputs}) {
      for (ValueId v : *values) {
        if (!spans_chain_pointwise(g, lp.groups[i], v)) continue;
        if (spanned[i] >= 0) same.emplace_back(spanned[i], v);
        spanned[i] = v;
      }
    }
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
  auto layout = [&](ValueId v) { return v >= 0 && in_chain[v] ? chain : ActivationLayout::kNchw; };
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& s = steps[i];
    if (roles[i].pointwise) {
      s.x_layout = s.y_layout = layout(spanned[i]);
    } else if (roles[i].any()) {
      s.x_layout = layout(s.inputs[0]);
      s.y_layout = roles[i].reduction ? ActivationLayout::kNchw : layout(s.outputs[0]);
    }
  }
}

}  // namespace crucible::codegen
