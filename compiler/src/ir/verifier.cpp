// The verifier: re-checks a graph's structure and re-infers every node type, so a graph edited by a
// pass (or read from a file) is known to be well formed before anyone compiles it.
#include <fmt/format.h>

#include <unordered_set>

#include "crucible/core/error.h"
#include "crucible/ir/gradients.h"
#include "crucible/ir/graph.h"
#include "crucible/ir/op_registry.h"

namespace crucible {

void verify(const Graph& g) {
  const auto& values = g.values();
  std::unordered_set<std::string> names;
  std::vector<bool> defined(values.size(), false);
  for (ValueId id : g.inputs()) defined.at(id) = true;
  for (ValueId id : g.params()) {
    defined.at(id) = true;
    const Value& v = values[id];
    if (v.init.empty() && !v.data.defined()) {
      throw GraphError(fmt::format("parameter %{} has neither an initializer nor data", v.name));
    }
    if (v.data.defined() && TensorType{v.data.dtype(), v.data.shape()} != v.type) {
      throw GraphError(fmt::format("parameter %{} is declared {} but holds {}", v.name,
                                   v.type.str(), TensorType{v.data.dtype(), v.data.shape()}.str()));
    }
  }
  for (const Value& v : values) {
    if (!names.insert(v.name).second)
      throw GraphError(fmt::format("value %{} is defined twice", v.name));
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<TensorType> types;
    for (ValueId op : n.operands) {
      if (op < 0 || static_cast<size_t>(op) >= values.size() || !defined[op]) {
        throw GraphError(
            fmt::format("node {} ({}): operand {} is used before it is defined", i, n.op, op));
      }
      types.push_back(values[op].type);
    }
    const Value& out = values.at(n.output);
    if (out.kind != ValueKind::kNode || out.node != static_cast<int>(i)) {
      throw GraphError(
          fmt::format("node {} ({}): result %{} is not owned by it", i, n.op, out.name));
    }
    Attrs attrs = n.attrs;
    TensorType t = infer_type(OpRegistry::global().get(n.op), types, attrs);
    if (t != out.type) {
      throw GraphError(fmt::format("node %{} = {}: declared {} but the op gives {}", out.name, n.op,
                                   out.type.str(), t.str()));
    }
    defined[n.output] = true;
  }
  if (g.outputs().empty()) throw GraphError(fmt::format("graph {} returns nothing", g.name()));
  for (ValueId id : g.outputs()) {
    if (id < 0 || static_cast<size_t>(id) >= values.size() || !defined[id]) {
      throw GraphError(fmt::format("graph {} returns an undefined value", g.name()));
    }
  }
  verify_gradients(g);
}

}  // namespace crucible
