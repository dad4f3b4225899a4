// Sums the ops' cost rules over a graph and derives its compulsory traffic: views are followed
// back to the value they alias, so an input read through a reshape still counts once.
#include "crucible/ir/graph_cost.h"

#include <algorithm>
#include <vector>

namespace crucible {

OpCost node_cost(const Graph& g, int index) {
  const Node& n = g.nodes().at(static_cast<size_t>(index));
  std::vector<TensorType> operands;
  operands.reserve(n.operands.size());
  for (ValueId v : n.operands) operands.push_back(g.value(v).type);
  return op_cost(OpRegistry::global().get(n.op), operands, g.value(n.output).type, n.attrs);
}

GraphCost graph_cost(const Graph& g) {
  GraphCost c;
  const size_t values = g.values().size();
  // root[v]: the value v aliases through views (itself when it is no view).
  std::vector<ValueId> root(values);
  for (size_t v = 0; v < values; ++v) root[v] = static_cast<ValueId>(v);
  // Bytes read of each root by ops, and whether some op read it whole.
  std::vector<double> read(values, 0.0);
  std::vector<bool> whole(values, false);
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    const OpCost oc = node_cost(g, i);
    c.flops += oc.flops;
    c.macs += oc.macs;
    c.unfused_bytes += oc.bytes();
    if (oc.view && !n.operands.empty()) {
      root[static_cast<size_t>(n.output)] = root[static_cast<size_t>(n.operands[0])];
      continue;
    }
    for (size_t k = 0; k < n.operands.size() && k < oc.reads.size(); ++k) {
      const auto r = static_cast<size_t>(root[static_cast<size_t>(n.operands[k])]);
      read[r] += oc.reads[k];
      if (oc.reads[k] >= g.value(n.operands[k]).type.bytes()) whole[r] = true;
    }
  }
  auto compulsory_read = [&](ValueId v) {
    const auto i = static_cast<size_t>(v);
    const double size = g.value(v).type.bytes();
    return whole[i] ? size : std::min(size, read[i]);
  };
  for (ValueId v : g.inputs()) c.min_bytes += compulsory_read(v);
  for (ValueId v : g.params()) c.min_bytes += compulsory_read(v);
  for (ValueId v : g.outputs()) c.min_bytes += g.value(v).type.bytes();
  return c;
}

}  // namespace crucible
