// Which node the cosim job blames for an accuracy failure, from every node's value on the backend,
// on eager and in fp64: the first whose divergence is its own, not inherited from its operands.
#pragma once

#include <string>
#include <vector>

#include "accuracy.h"
#include "crucible/ir/graph.h"

namespace crucible::minify {

// Every node's value of `g` on `inputs`, in graph order (nodes()[k].output's at k), as the backend,
// eager and the fp64 reference computed them.
struct NodeValues {
  std::vector<Tensor> backend, eager, fp64;
};

// The value name of the node to blame, or "" when every node passes the rule. A node diverges when
// its backend value fails the rule against eager and fp64 of the whole graph; it diverges by itself
// when its op, run again by eager and in fp64 on the backend's own values of its operands, also
// disagrees with its backend value. Blamed: the first node that diverges by itself; else the first
// that diverges at all. A node that is right on what it was given only inherits a divergence: a
// relu mask that f32 rounding decided the other way upstream (a tie), and everything the mask
// reaches downstream, must not hide the wrong backward after it.
std::string blame_node(const Graph& g, const std::vector<Tensor>& inputs, const NodeValues& values,
                       const AccuracyOptions& opts);

}  // namespace crucible::minify
