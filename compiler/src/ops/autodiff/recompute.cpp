// The partitioner of a joint graph: which forward values its backward reads (the saved
// activations), and the rewrite that recomputes the cheap ones in the backward instead, so that
// only what matmuls, convolutions and reductions made stays alive from the forward to the
// backward (AOTAutograd's default rule; codegen fuses the recomputation into the backward's
// kernels).
#include <fmt/format.h>

#include <functional>

#include "crucible/ir/op_registry.h"
#include "crucible/ops/autodiff.h"
#include "graph_copy.h"

namespace crucible {

namespace {

bool in_forward(const Graph& g, ValueId v, size_t forward_nodes) {
  const int n = g.value(v).node;
  return n >= 0 && static_cast<size_t>(n) < forward_nodes;
}

// Elementwise (the registry's default cost: no rule of its own) or a view, by the op's own
// declaration: the registry, not a list here, says which ops are cheap.
bool cheap_op(const Graph& g, const Node& n) {
  const OpDef* def = OpRegistry::global().find(n.op);
  if (def == nullptr) return false;
  if (!def->cost) return true;
  std::vector<TensorType> in;
  for (ValueId o : n.operands) in.push_back(g.value(o).type);
  return op_cost(*def, in, g.value(n.output).type, n.attrs).view;
}

}  // namespace

SavedActivations saved_activations(const Graph& joint, size_t forward_nodes) {
  SavedActivations out;
  std::vector<bool> seen(joint.values().size(), false);
  for (size_t i = forward_nodes; i < joint.nodes().size(); ++i) {
    for (ValueId o : joint.nodes()[i].operands) {
      if (seen[o] || !in_forward(joint, o, forward_nodes)) continue;
      seen[o] = true;
      out.saved.push_back(o);
      out.bytes += joint.value(o).type.bytes();
    }
  }
  return out;
}

Graph recompute_cheap(const Graph& joint, size_t forward_nodes) {
  std::vector<bool> output(joint.values().size(), false), pinned(joint.values().size(), false);
  for (ValueId v : joint.outputs()) output[v] = true;
  // A saved result's operands are saved too: a recomputed copy may differ from the forward's in
  // the last bit (another fusion, another FMA contraction), and a rule that reads both an operand
  // and the result, as max_pool2d's and amax's do to find each window's maximum by equality,
  // needs the operand the result was computed from. (Recomputing resnet18's relu before its max
  // pool made codegen's gradients wrong while eager's stayed right.)
  const SavedActivations saved = saved_activations(joint, forward_nodes);
  for (ValueId v : saved.saved) {
    const Node& n = joint.nodes()[joint.value(v).node];
    if (!cheap_op(joint, n))
      for (ValueId o : n.operands) pinned[o] = true;
  }
  // A forward value the backward recomputes: a cheap op's, not pinned, not an output (alive to
  // the end anyway).
  auto recomputed = [&](ValueId v) {
    return in_forward(joint, v, forward_nodes) && !output[v] && !pinned[v] &&
           cheap_op(joint, joint.nodes()[joint.value(v).node]);
  };
  Graph g(joint.name());
  g.set_base_dir(joint.base_dir());
  g.set_source_file(joint.source_file());
  std::vector<ValueId> map(joint.values().size(), -1), copy(joint.values().size(), -1);
  for (ValueId v : joint.inputs()) map[v] = copy_leaf(g, joint, v);
  for (ValueId v : joint.params()) map[v] = copy_leaf(g, joint, v);
  // The backward's copy of forward value v: recomputed from its operands' copies, down to the
  // values that are saved (what is not cheap, inputs and parameters).
  std::function<ValueId(ValueId)> in_backward = [&](ValueId v) -> ValueId {
    if (!recomputed(v)) return map[v];
    if (copy[v] >= 0) return copy[v];
    const Node& n = joint.nodes()[joint.value(v).node];
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(in_backward(o));
    copy[v] = g.add_node(n.op, std::move(operands), n.attrs,
                         free_name(g, joint.value(v).name + ".recompute"), n.loc);
    return copy[v];
  };
  for (size_t i = 0; i < joint.nodes().size(); ++i) {
    const Node& n = joint.nodes()[i];
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(i < forward_nodes ? map[o] : in_backward(o));
    map[n.output] =
        g.add_node(n.op, std::move(operands), n.attrs, joint.value(n.output).name, n.loc);
  }
  std::vector<ValueId> outputs;
  for (ValueId v : joint.outputs()) outputs.push_back(map[v]);
  g.set_outputs(outputs);
  return g;
}

}  // namespace crucible
