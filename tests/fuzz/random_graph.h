// Random valid graphs over the whole op registry, for differential testing of backends: every
// dtype, broadcasting, views, size-0 and size-1 dims, reductions over any dim set, NaN/inf inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible::fuzz {

struct GenOptions {
  int min_nodes = 2;
  int max_nodes = 10;
  double zero_dim_probability = 0.06;      // per dimension of a fresh input
  double special_value_probability = 0.5;  // per float input: plant NaN / +-inf / huge / tiny
};

// A graph drawn from `seed` (the same seed gives the same graph on every machine). Nodes are
// proposed at random and kept when the op's own type rule accepts them, so every graph is valid
// and the op mix follows the registry, not a hand-kept list of shapes.
Graph random_graph(uint64_t seed, const GenOptions& opts = {});

// Inputs for `g` from make_inputs(g, seed), with NaN, +-inf, huge and tiny values planted at
// random positions of some float inputs.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const GenOptions& opts = {});

}  // namespace crucible::fuzz
