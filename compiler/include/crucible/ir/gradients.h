// A graph's gradient sets (Graph::gradients): which of its nodes are a set's backward, and the
// checks verify() makes, so a backend that computes the gradients its own way knows what it skips.
#pragma once

#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

// The nodes that are `set`'s backward: those its gradients depend on that the loss does not
// (indices into g.nodes(), as a mask). A backend computing the gradients its own way runs none
// of them.
std::vector<bool> backward_nodes(const Graph& g, const GradientSet& set);

// Whether the gradients alone leave the backward: no live node outside it (one an output depends
// on) and no graph output reads one of its values other than the gradients. When they do not, the
// nodes must run (a backend may not replace them).
bool backward_is_sealed(const Graph& g, const GradientSet& set, const std::vector<bool>& backward);

// The nodes `roots` depend on, those making a root included (a mask over g.nodes()).
std::vector<bool> nodes_reaching(const Graph& g, const std::vector<ValueId>& roots);

// The nodes some graph output depends on: the others are dead, and a backend that replaces a
// backward skips them too.
std::vector<bool> live_nodes(const Graph& g);

// Whether each of g's outputs comes after an update: it depends on a node of a set's forward that
// reads the set's parameters where a gradient moved them (a later training step; a parameter's
// own update is not one). Rounding there has been through a step that amplifies it: one f32 run
// is one draw of a spread, not a bound.
std::vector<bool> outputs_after_an_update(const Graph& g);

// Throws GraphError unless every set's ids are values of `g`, its loss and each wrt are floating,
// wrt and grads pair up one to one with equal types, each gradient is a node result, and no
// gradient is the loss or a value the loss depends on. Called by verify().
void verify_gradients(const Graph& g);

}  // namespace crucible
