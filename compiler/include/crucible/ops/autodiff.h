// Reverse-mode autodiff on the IR: a forward graph's gradients as more nodes of registry ops, so
// every backend, and the fp64 reference, runs a backward graph with no code of its own for it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

// The forward graph with its backward appended: its outputs are the forward's, then d(loss) /
// d(wrt[i]) for each i, named "grad.NAME" after the value. The loss is the forward's first output
// (of any shape: its gradient seed is ones, the gradient of its sum). Throws GraphError naming
// the op and the node for a node on the way from `wrt` to the loss whose op has no gradient rule
// (an index op, a comparison), and the value for a `wrt` that is not floating. A `wrt` the loss
// does not depend on (or only through ops of zero gradient, as floor) gets zeros.
Graph joint_graph(const Graph& forward, std::span<const ValueId> wrt);

// Whether `op` has a gradient rule, and all the ops that do (sorted).
bool differentiable(const std::string& op);
std::vector<std::string> differentiable_ops();

}  // namespace crucible
