// Zeller's ddmin over the kept nodes: try each chunk alone, then each chunk's complement, doubling
// the granularity when neither fails. A removed node read by a kept one becomes an input fed with
// its recorded eager value, so every subset is a runnable graph. Ends 1-minimal: no single kept
// node can be removed.
#include <algorithm>

#include "pass.h"

namespace crucible::minify {

namespace {

std::vector<std::vector<int>> split(const std::vector<int>& keep, size_t n) {
  std::vector<std::vector<int>> chunks;
  for (size_t i = 0; i < n; ++i) {
    const size_t b = keep.size() * i / n, e = keep.size() * (i + 1) / n;
    if (b < e) chunks.emplace_back(keep.begin() + b, keep.begin() + e);
  }
  return chunks;
}

std::vector<int> without(const std::vector<int>& keep, const std::vector<int>& chunk) {
  std::vector<int> out;
  std::set_difference(keep.begin(), keep.end(), chunk.begin(), chunk.end(),
                      std::back_inserter(out));
  return out;
}

class Ddmin : public ReductionPass {
 public:
  std::string name() const override { return "ddmin"; }
  bool run(ReduceState& state) const override {
    const size_t start = state.keep().size();
    size_t n = 2;
    while (state.keep().size() >= 2) {
      const std::vector<int> keep = state.keep();
      const auto chunks = split(keep, std::min(n, keep.size()));
      bool reduced = state.try_first(chunks) >= 0;
      if (reduced) n = 2;
      // With two chunks each complement is the other chunk, already tried.
      if (!reduced && chunks.size() > 2) {
        std::vector<std::vector<int>> complements;
        for (const auto& c : chunks) complements.push_back(without(keep, c));
        reduced = state.try_first(complements) >= 0;
        if (reduced) n = std::max<size_t>(n - 1, 2);
      }
      if (!reduced) {
        if (n >= keep.size()) break;
        n = std::min(2 * n, keep.size());
      }
    }
    return state.keep().size() < start;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_ddmin_pass() { return std::make_unique<Ddmin>(); }

}  // namespace crucible::minify
