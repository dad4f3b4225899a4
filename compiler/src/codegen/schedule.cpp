// The pipeline's last pass: the runtime's step list, one step per group of the fused loop program
// (a generated kernel with its buffers, a packed GEMM or convolution call, an extern call, a view).
#include <fmt/format.h>

#include "passes.h"

namespace crucible::codegen {

namespace {

Step kernel_step(const MemoryPlan& mp, size_t gi) {
  Step s;
  s.kind = Step::Kind::kKernel;
  s.inputs = mp.inputs[gi];
  s.outputs = mp.outputs[gi];
  s.in_place = mp.in_place[gi];
  return s;
}

// y = epilogue(x @ W^T + b); the value before the epilogue is stored too when it is kept.
Step packed_linear_step(const Graph& g, const Group& grp, const std::set<ValueId>& keep) {
  Step s;
  s.kind = Step::Kind::kPackedLinear;
  s.node = grp.nodes[0];
  const Node& n = g.nodes()[s.node];
  s.inputs = {n.operands[0]};
  s.outputs = {g.nodes()[grp.nodes.back()].output};
  s.weight = n.operands[1];
  s.bias = n.operands.size() > 2 ? n.operands[2] : -1;
  s.weight_nk = n.op == "linear";
  if (grp.nodes.size() > 1) {
    if (keep.contains(n.output)) s.raw = n.output;
    const Node& act = g.nodes()[grp.nodes[1]];
    s.epilogue = act.op;
    if (act.op == "gelu" && act.attrs.get_string_or("approximate", "none") == "tanh")
      s.epilogue = "gelu_tanh";
  }
  return s;
}

// The conv with what it absorbed, in chain order: batch_norm, residual add, activation.
Step packed_conv_step(const Graph& g, const Group& grp) {
  Step s;
  s.kind = Step::Kind::kPackedConv;
  s.node = grp.nodes[0];
  const Node& n = g.nodes()[s.node];
  s.inputs = {n.operands[0]};
  s.weight = n.operands[1];
  s.bias = n.operands.size() > 2 ? n.operands[2] : -1;
  ValueId chain = n.output;  // the value the next absorbed node reads
  for (size_t k = 1; k < grp.nodes.size(); ++k) {
    const Node& m = g.nodes()[grp.nodes[k]];
    if (m.op == "batch_norm") {
      s.bn_node = grp.nodes[k];
    } else if (m.op == "add") {
      s.residual = m.operands[0] == chain ? m.operands[1] : m.operands[0];
      s.inputs.push_back(s.residual);
    } else {
      s.act_node = grp.nodes[k];
    }
    chain = m.output;
  }
  s.outputs = {chain};
  return s;
}

// An extern call reads its operands; a view reads the base buffer it is a static layout over.
Step single_node_step(const Graph& g, const LoopProgram& lp, const Group& grp) {
  Step s;
  s.kind = grp.kind == Group::Kind::kExtern ? Step::Kind::kExtern : Step::Kind::kView;
  s.node = grp.nodes[0];
  const Node& n = g.nodes()[s.node];
  s.outputs = {n.output};
  if (s.kind == Step::Kind::kView) {
    ValueId base;
    view_layout(g, s.node, lp.classes, base, s.view_shape, s.view_strides, s.view_offset);
    s.inputs = {base};
  } else {
    s.inputs = n.operands;
  }
  return s;
}

std::string value_list(const Graph& g, const std::vector<ValueId>& values) {
  std::string out;
  for (ValueId v : values) out += (out.empty() ? "%" : ", %") + g.value(v).name;
  return out;
}

}  // namespace

std::vector<Step> schedule(const Graph& g, const LoopProgram& lp, const MemoryPlan& mp,
                           const std::set<ValueId>& keep) {
  std::vector<Step> steps;
  for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
    const Group& grp = lp.groups[gi];
    Step s = grp.kind == Group::Kind::kKernel         ? kernel_step(mp, gi)
             : grp.kind == Group::Kind::kPackedLinear ? packed_linear_step(g, grp, keep)
             : grp.kind == Group::Kind::kPackedConv   ? packed_conv_step(g, grp)
                                                      : single_node_step(g, lp, grp);
    s.name = grp.name;
    s.nodes = grp.nodes;
    steps.push_back(std::move(s));
  }
  return steps;
}

std::string print_schedule(const Graph& g, const std::vector<Step>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    out += fmt::format("step {:>3} {}({}) -> {}", i, s.name, value_list(g, s.inputs),
                       value_list(g, s.outputs));
    for (size_t k = 0; k < s.in_place.size(); ++k) {
      if (s.in_place[k] >= 0)
        out += fmt::format(" [%{} in place of %{}]", g.value(s.outputs[k]).name,
                           g.value(s.inputs[s.in_place[k]]).name);
    }
    if (s.weight >= 0) out += fmt::format(" weight %{}", g.value(s.weight).name);
    if (s.bias >= 0) out += fmt::format(" bias %{}", g.value(s.bias).name);
    if (s.kind == Step::Kind::kPackedLinear && s.epilogue != "none")
      out += " epilogue " + s.epilogue;
    if (s.x_layout != ActivationLayout::kNchw || s.y_layout != ActivationLayout::kNchw)
      out += fmt::format(" layout {} -> {}", layout_name(s.x_layout), layout_name(s.y_layout));
    if (s.kind == Step::Kind::kView)
      out += fmt::format(" as {} strides {} offset {}", shape_str(s.view_shape),
                         shape_str(s.view_strides), s.view_offset);
    out += "\n";
  }
  return out;
}

}  // namespace crucible::codegen
