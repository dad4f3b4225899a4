// Generated kernels that run on a chain layout (NHWC or nChw8c) as well as on NCHW, so the layout
// pass can keep a squeeze-excite block's or a global pool's activations channels-inner.
#include <fmt/format.h>

#include "passes.h"

namespace crucible::codegen {

namespace {

bool is_view(const Graph& g, const LoopProgram& lp, ValueId v) {
  const Value& val = g.value(v);
  return val.kind == ValueKind::kNode && lp.classes[val.node] == NodeClass::kView;
}

// Broadcast alike over H and W of an [N,C,H,W] space: rank 4 with H = W = 1, or one element. A
// rank-1 [C] would broadcast along W, not C, so it does not count.
bool spatially_uniform(const Shape& s) {
  int64_t numel = 1;
  for (int64_t d : s) numel *= d;
  return numel == 1 || (s.size() == 4 && s[2] == 1 && s[3] == 1);
}

}  // namespace

bool is_chain_pointwise(const Graph& g, const LoopProgram& lp, const Group& grp) {
  if (grp.kind != Group::Kind::kKernel || grp.has_reduction || grp.outer.size() != 4 ||
      grp.outer[2] * grp.outer[3] <= 1) {
    return false;
  }
  // Every value over the whole space is an f32 buffer of its own (a view's strides would be
  // NCHW's); every other one is read alike at each pixel.
  auto fits = [&](ValueId v) {
    const TensorType& t = g.value(v).type;
    if (t.shape == grp.outer) return t.dtype == DType::kF32 && !is_view(g, lp, v);
    return spatially_uniform(t.shape);
  };
  for (int ni : grp.nodes) {
    const Node& n = g.nodes()[ni];
    if (lp.classes[ni] != NodeClass::kPointwise || !fits(n.output)) return false;
    for (ValueId o : n.operands) {
      if (!fits(o)) return false;
    }
  }
  return true;
}

bool spans_chain_pointwise(const Graph& g, const Group& grp, ValueId v) {
  return g.value(v).type.shape == grp.outer;
}

bool is_chain_spatial_reduction(const Graph& g, const LoopProgram& lp, const Group& grp) {
  if (grp.kind != Group::Kind::kKernel || !grp.has_reduction || grp.nodes.size() != 1 ||
      grp.outer.size() != 2) {
    return false;
  }
  const Node& n = g.nodes()[grp.nodes[0]];
  if (n.op != "sum" && n.op != "mean") return false;
  const TensorType& x = g.value(n.operands[0]).type;
  return x.dtype == DType::kF32 && g.value(n.output).type.dtype == DType::kF32 &&
         x.shape.size() == 4 && x.shape[2] * x.shape[3] > 1 && !is_view(g, lp, n.operands[0]);
}

std::string emit_chain_spatial_reduction(const Graph& g, const Group& grp, ActivationLayout layout,
                                         const Injection& inj, bool parallel) {
  const Node& n = g.nodes()[grp.nodes[0]];
  const Shape& x = g.value(n.operands[0]).type.shape;
  const int64_t batch = x[0], c = x[1], hw = x[2] * x[3];
  // A row is `lanes` channels of one image: an nChw8c block, or 8 (else all) channels of NHWC,
  // whose pixels lie `step` floats apart; the lanes are the SIMD loop and the pixels are summed
  // into 4 partial accumulators, so a long row rounds less than one running sum would.
  const bool blocked = layout == ActivationLayout::kNchw8c;
  const int64_t lanes = blocked || c % 8 == 0 ? 8 : c;
  const int64_t blocks = c / lanes;
  const int64_t step = blocked ? 8 : c;
  const int64_t block_stride = blocked ? hw * 8 : lanes;
  const bool planted = inj.hits(n.op, g.value(n.output).name);
  const std::string lane = inj.kind == "offbyone" && planted
                               ? fmt::format("(l + 1) % {}", lanes)  // the planted wrong read
                               : "l";
  const std::string init =
      inj.kind == "bad_init" && planted ? "u == 0 ? 1.0f : 0.0f" : "0.0f";  // the planted bug
  const std::string finish = n.op == "mean" ? fmt::format(" / static_cast<float>({})", hw) : "";
  std::string s = fmt::format(
      "  // %{0} = {1}(%{2}) over H and W of {3}\n"
      "  #pragma omp parallel for schedule(static) if ({4})\n"
      "  for (int64_t r = 0; r < {5}; ++r) {{\n"
      "    const int64_t n = r / {6}, cb = r % {6};\n"
      "    const float* x = a0 + n * {7} + cb * {8};\n"
      "    float acc[4][{9}];\n"
      "    for (int u = 0; u < 4; ++u)\n"
      "      for (int64_t l = 0; l < {9}; ++l) acc[u][l] = {10};\n"
      "    int64_t p = 0;\n"
      "    for (; p + 4 <= {11}; p += 4) {{\n"
      "      for (int u = 0; u < 4; ++u) {{\n"
      "        #pragma omp simd\n"
      "        for (int64_t l = 0; l < {9}; ++l) acc[u][l] += x[(p + u) * {12} + {13}];\n"
      "      }}\n"
      "    }}\n"
      "    for (; p < {11}; ++p) {{\n"
      "      #pragma omp simd\n"
      "      for (int64_t l = 0; l < {9}; ++l) acc[0][l] += x[p * {12} + {13}];\n"
      "    }}\n"
      "    #pragma omp simd\n"
      "    for (int64_t l = 0; l < {9}; ++l)\n"
      "      a1[n * {14} + cb * {9} + l] = ((acc[0][l] + acc[1][l]) + (acc[2][l] + "
      "acc[3][l])){15};\n"
      "  }}\n",
      g.value(n.output).name, n.op, g.value(n.operands[0]).name, layout_name(layout),
      parallel ? "true" : "false", batch * blocks, blocks, c * hw, block_stride, lanes, init, hw,
      step, lane, c, finish);
  return s;
}

}  // namespace crucible::codegen
