// Ties: elements of a float comparison (a relu6's `ge` mask, a max-pool's `eq`) whose fp64 margin
// is within the f32 rounding eager itself shows on the operands, so either answer is an f32 one.
// Found and decided the other way by the fp64 reference, in a worker that loads no plugin.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

namespace crucible {

struct Tie {
  int node = -1;         // index into the graph's nodes
  int64_t element = -1;  // linear index into that node's result
  double margin = 0;     // a - b in fp64 at that element
  double noise = 0;      // the band it fell in: kTieNoise times eager's largest operand errors
};

// A tie's margin is within this many times the largest |f32 - fp64| eager shows on the
// comparison's operands (each operand's own, summed): a backend's order of additions may round
// a few times as far as eager's.
inline constexpr double kTieNoise = 4.0;
// The ties a verdict decides the other way one at a time (an fp64 run each), the closest first.
inline constexpr size_t kMaxTies = 16;

// Whether node `n` of `g` compares floating values (ge, gt, le, lt, eq, ne).
bool is_float_comparison(const Graph& g, const Node& n);
bool has_float_comparison(const Graph& g);

// The ties of `g` on `inputs`, the smallest margins (relative to their band) first, at most
// `cap`; `total` gets how many there were. An element both runs decide on an exact equality
// (margin 0 in f32 and in fp64: a structural tie, such as a padded zero) is no tie: there the
// op's convention decides, and a backend that breaks it is wrong.
std::vector<Tie> find_ties(const Graph& g, std::span<const Tensor> inputs, size_t cap,
                           size_t& total);

// The fp64 reference's outputs with `tie` decided the other way.
std::vector<Tensor> fp64_with_tie_flipped(const Graph& g, std::span<const Tensor> inputs,
                                          const Tie& tie);

// "%name[element] (margin m, band b)", for messages.
std::string describe_tie(const Graph& g, const Tie& tie);

}  // namespace crucible
