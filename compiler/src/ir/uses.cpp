// Readers and last uses of a graph's values (see uses.h).
#include "crucible/ir/uses.h"

namespace crucible {

std::vector<std::vector<int>> readers_of(const Graph& g) {
  std::vector<std::vector<int>> readers(g.values().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].operands) readers[v].push_back(static_cast<int>(i));
  }
  return readers;
}

namespace {

std::vector<int> last_uses_of_steps(const Graph& g, size_t steps, auto reads_of,
                                    std::span<const ValueId> live_out) {
  std::vector<int> last(g.values().size(), -1);
  for (size_t i = 0; i < steps; ++i) {
    for (ValueId v : reads_of(i)) last[v] = static_cast<int>(i);
  }
  for (ValueId v : g.outputs()) last[v] = kLiveToEnd;
  for (ValueId v : live_out) last[v] = kLiveToEnd;
  return last;
}

}  // namespace

std::vector<int> last_uses(const Graph& g, const std::vector<std::vector<ValueId>>& step_reads,
                           std::span<const ValueId> live_out) {
  return last_uses_of_steps(
      g, step_reads.size(), [&](size_t i) -> const std::vector<ValueId>& { return step_reads[i]; },
      live_out);
}

std::vector<int> last_uses(const Graph& g, std::span<const ValueId> live_out) {
  return last_uses_of_steps(
      g, g.nodes().size(),
      [&](size_t i) -> const std::vector<ValueId>& { return g.nodes()[i].operands; }, live_out);
}

}  // namespace crucible
