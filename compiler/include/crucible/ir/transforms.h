// Whole-graph rewrites used by the harness: the fp64 reference graph (every floating input and
// parameter widened to f64, node types re-inferred).
#pragma once

#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

// A copy of `g` whose floating inputs and parameters are f64, and whose float dtype attributes
// (cast, full, arange) say f64, so every float is computed in f64. Parameters are materialized in
// their declared dtype first and then widened, so the reference sees exactly the values the model
// has.
Graph widen_to_f64(const Graph& g);
// Widens floating tensors to f64 (others returned as they are), for the inputs of widen_to_f64's
// graph.
std::vector<Tensor> widen_inputs_to_f64(const std::vector<Tensor>& inputs);

}  // namespace crucible
