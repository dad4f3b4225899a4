// The roofline figures of a scheduled step: FLOPs from the op registry's cost rules over the nodes
// it runs, bytes from the buffers it is handed, which is what a fused kernel must move at least.
#include "crucible/codegen/program.h"
#include "crucible/ir/graph_cost.h"

namespace crucible::codegen {

StepCost step_cost(const Graph& graph, const Step& step) {
  StepCost c;
  if (step.kind == Step::Kind::kView) return c;
  for (int n : step.nodes) c.flops += node_cost(graph, n).flops;
  if (step.kind == Step::Kind::kExtern) {
    c.bytes = node_cost(graph, step.node).bytes();
    return c;
  }
  for (ValueId v : step.inputs) c.bytes += graph.value(v).type.bytes();
  for (ValueId v : step.outputs) c.bytes += graph.value(v).type.bytes();
  // Packed steps are handed only the activation; their weights are read on every call too.
  if (step.kind == Step::Kind::kPackedLinear) {
    c.bytes += graph.value(step.weight).type.bytes();
    if (step.bias >= 0) c.bytes += graph.value(step.bias).type.bytes();
  } else if (step.kind == Step::Kind::kPackedConv) {
    const Node& conv = graph.nodes()[static_cast<size_t>(step.node)];
    for (size_t k = 1; k < conv.operands.size(); ++k)
      c.bytes += graph.value(conv.operands[k]).type.bytes();
  }
  return c;
}

}  // namespace crucible::codegen
