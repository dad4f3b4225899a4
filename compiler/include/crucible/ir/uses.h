// Who reads a graph's values: each value's readers and its last use, computed one way for the
// passes that fuse by them and the runtimes that free by them.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

// Per value: the indices of the nodes reading it, ascending (a node reading it twice is listed
// twice).
std::vector<std::vector<int>> readers_of(const Graph& g);

// The last use of a value that outlives every step: a graph output, or a value a caller keeps.
inline constexpr int kLiveToEnd = std::numeric_limits<int>::max();

// Per value: the index of the last step reading it, -1 when no step does, kLiveToEnd for graph
// outputs and for every value in `live_out`. `step_reads[i]` lists the values step i reads (a
// compiled program's steps); the second form takes the graph's nodes as the steps.
std::vector<int> last_uses(const Graph& g, const std::vector<std::vector<ValueId>>& step_reads,
                           std::span<const ValueId> live_out = {});
std::vector<int> last_uses(const Graph& g, std::span<const ValueId> live_out = {});

}  // namespace crucible
