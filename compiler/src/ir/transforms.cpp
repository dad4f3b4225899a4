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
    // A float dtype an op is told to produce (cast, full, arange) is f64 too: the reference
    // computes every float in f64, and a bf16 cast left in place would meet f64 parameters.
    Attrs attrs = n.attrs;
    for (const auto& [name, value] : n.attrs.items()) {
      if (const DType* d = std::get_if<DType>(&value); d != nullptr && is_floating(*d)) {
        attrs.set(name, DType::kF64);
      }
    }
    map[n.output] = out.add_node(n.op, operands, attrs, g.value(n.output).name, n.loc);
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
