// The roofline figures of a scheduled step: FLOPs from the op registry's cost rules over the nodes
// it runs, bytes from the buffers it is handed, which is what a fused kernel must move at least.
#include "crucible/codegen/program.h"
#include "crucible/ir/graph_cost.h"

namespace crucible::codegen {

namespace {

double bytes_of(const Graph& g, ValueId v) {
  const TensorType& t = g.value(v).type;
  return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype));
}

}  // namespace

StepCost step_cost(const Graph& graph, const Step& step) {
  StepCost c;
  if (step.kind == Step::Kind::kView) return c;
  for (int n : step.nodes) c.flops += node_cost(graph, n).flops;
  if (step.kind == Step::Kind::kExtern) {
    c.bytes = node_cost(graph, step.node).bytes();
    return c;
  }
  for (ValueId v : step.inputs) c.bytes += bytes_of(graph, v);
  for (ValueId v : step.outputs) c.bytes += bytes_of(graph, v);
  // Packed steps are handed only the activation; their weights are read on every call too.
  if (step.kind == Step::Kind::kPackedLinear) {
    c.bytes += bytes_of(graph, step.weight);
    if (step.bias >= 0) c.bytes += bytes_of(graph, step.bias);
  } else if (step.kind == Step::Kind::kPackedConv) {
    const Node& conv = graph.nodes()[static_cast<size_t>(step.node)];
    for (size_t k = 1; k < conv.operands.size(); ++k) c.bytes += bytes_of(graph, conv.operands[k]);
  }
  return c;
}

}  // namespace crucible::codegen
