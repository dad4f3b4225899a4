// What a graph must compute and move at the least, from its shapes and ops' cost rules: the
// numerators of every roofline figure (achieved GFLOP/s, GB/s and the fraction of the bound).
#pragma once

#include "crucible/ir/graph.h"
#include "crucible/ir/op_registry.h"

namespace crucible {

struct GraphCost {
  double flops = 0;
  double macs = 0;  // the multiply-adds among them: what model papers publish as "FLOPs"
  // Compulsory traffic: every input and parameter read once (only the rows a gather reads of a
  // table), every output written once. No executor can move less, however it fuses.
  double min_bytes = 0;
  // What an op-by-op executor moves: each op's reads and writes, views free.
  double unfused_bytes = 0;
};

// The cost of node `index` of `g` (its op's cost rule on its operands' types).
OpCost node_cost(const Graph& g, int index);

GraphCost graph_cost(const Graph& g);

}  // namespace crucible
