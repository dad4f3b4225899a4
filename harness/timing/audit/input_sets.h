// The timing audit's input sets beyond the model's own (set A): set B, drawn from --seed, and the
// inputs of every timed call, each its own, made from set B and the timing's secret. Both the
// timing worker and the reference worker (which computes eager's outputs on them) make them here.
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

// The inputs of timed call `call` (its id: see timing_job.cpp) for the timing's `secret`, written
// into `into` (made like `set_b` when empty): each input of set B rotated by a secret offset, then
// eight pairs of its elements swapped. The values stay those of B (so in every op's domain, and
// indices valid) while the contents differ from every other call's: a remembered output is a wrong
// one. A rotation copies the bytes once (drawing add_add_mul_add's 16 Mi values anew took 150 ms).
void fill_call_inputs(const std::vector<Tensor>& set_b, uint64_t secret, uint64_t call,
                      std::vector<Tensor>& into);
std::vector<Tensor> call_input_set(const std::vector<Tensor>& set_b, uint64_t secret,
                                   uint64_t call);

// A secret from the OS's entropy (getrandom): the call inputs' and the verified elements' seeds.
uint64_t os_secret();

}  // namespace crucible
