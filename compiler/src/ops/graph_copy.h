// Building one graph from another, as the rewrites above the IR do (the joint graph, the
// partitioner, training steps): a leaf copied over, and a node name that stays unique.
#pragma once

#include <string>

#include "crucible/ir/graph.h"

namespace crucible {

// `base` when no value of `g` has that name, else "" (add_node then picks a fresh one).
inline std::string free_name(const Graph& g, const std::string& base) {
  return g.find_value(base) ? "" : base;
}

// A copy of `from`'s input or parameter `v` into `into` (its data, recipe and source position); a
// parameter is made an input with its recipe when `as_input`.
inline ValueId copy_leaf(Graph& into, const Graph& from, ValueId v, bool as_input = false) {
  const Value& x = from.value(v);
  ValueId out;
  if (x.kind == ValueKind::kInput || as_input) {
    out = into.add_input(x.name, x.type, x.init);
  } else if (x.data.defined()) {
    out = into.add_param_data(x.name, x.data);
  } else {
    out = into.add_param(x.name, x.type, x.init);
  }
  into.set_source(out, x.loc);
  return out;
}

}  // namespace crucible
