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

// The saved activations of a joint graph whose first `forward_nodes` nodes are its forward: the
// forward's node results its backward reads (inputs and parameters are not saved: they live
// anyway), in the order the backward first reads them, and their bytes.
struct SavedActivations {
  std::vector<ValueId> saved;
  double bytes = 0;
};
SavedActivations saved_activations(const Graph& joint, size_t forward_nodes);

// The partitioner's rule (AOTAutograd's default): the backward recomputes every saved value whose
// op is cheap (elementwise or a view, as the registry's cost rules declare them), from its
// operands recomputed in turn, down to what matmuls, convolutions, reductions and the other
// non-elementwise ops made, which alone stay saved; a graph output is never recomputed, nor an
// operand of a saved result (a recomputed copy may differ in the last bit, and a rule may find a
// maximum by comparing the operand with the result). The
// copies are named "V.recompute". The values are the same; what stays alive from the forward to
// the backward shrinks to saved_activations of the result (the figures: design_decisions.md).
Graph recompute_cheap(const Graph& joint, size_t forward_nodes);

// Whether `op` has a gradient rule, and all the ops that do (sorted).
bool differentiable(const std::string& op);
std::vector<std::string> differentiable_ops();

}  // namespace crucible
