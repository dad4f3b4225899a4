// The timing audit's input sets beyond the model's own (set A): set B, drawn from --seed, and the
// fresh sets hidden among the timed calls, drawn from the timing's secret. Both the timing worker
// and the reference worker (which computes eager's outputs on them) make them here.
#pragma once

#include <cstdint>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible {

// The model with every floating input that has a constant recipe (ones(), zeros(), full(), file())
// drawing randn instead, so that the audit's other sets differ from A even for a model that feeds
// constants.
Graph with_varied_inputs(const Graph& g);

// Input set B of the model (`varied` from with_varied_inputs) for --seed `seed`.
std::vector<Tensor> second_input_set(const Graph& varied, uint64_t seed);

// Fresh set `j` for the timing's `secret`. Small sets are drawn from the recipes as set B is;
// from 1 MiB of inputs, set B with each input rotated by a secret offset: its values in other
// places, so other contents and other answers, from the same distribution (drawing
// add_add_mul_add's 16 Mi randn and uniform values took about 150 ms, a rotation copies 64 MB).
std::vector<Tensor> fresh_input_set(const Graph& varied, const std::vector<Tensor>& set_b,
                                    uint64_t secret, uint64_t j);

}  // namespace crucible
