// Whole-graph rewrites (see transforms.h).
#include "crucible/ir/transforms.h"

#include "crucible/ir/op_registry.h"

namespace crucible {

namespace {
TensorType widened(const TensorType& t) {
  return is_floating(t.dtype) ? TensorType{DType::kF64, t.shape} : t;
}
}  // namespace

Graph widen_to_f64(const Graph& g) {
  Graph out(g.name());
  out.set_base_dir(g.base_dir());
  std::vector<ValueId> map(g.values().size(), -1);
  for (ValueId id : g.inputs()) {
    const Value& v = g.value(id);
    map[id] = out.add_input(v.name, widened(v.type), v.init);
  }
  for (ValueId id : g.params()) {
    const Value& v = g.value(id);
    Tensor data = materialize_param(g, id);
    map[id] = out.add_param_data(v.name, is_floating(data.dtype()) ? data.to(DType::kF64) : data);
  }
  for (const Node& n : g.nodes()) {
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(map[o]);
    map[n.output] = out.add_node(n.op, operands, n.attrs, g.value(n.output).name, n.loc);
  }
  std::vector<ValueId> outputs;
  for (ValueId o : g.outputs()) outputs.push_back(map[o]);
  out.set_outputs(outputs);
  return out;
}

std::vector<Tensor> widen_inputs_to_f64(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(is_floating(t.dtype()) ? t.to(DType::kF64) : t);
  return out;
}

}  // namespace crucible
