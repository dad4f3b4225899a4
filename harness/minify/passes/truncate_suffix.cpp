// Prefix bisection: the shortest prefix of the kept nodes (in graph order) that still fails, its
// last nodes becoming the outputs. O(log n) oracle calls; the first cut on a large graph.
#include "pass.h"

namespace crucible::minify {

namespace {

class TruncateSuffix : public ReductionPass {
 public:
  std::string name() const override { return "truncate_suffix"; }
  bool run(ReduceState& state) const override {
    const std::vector<int> keep = state.keep();
    size_t lo = 1, hi = keep.size();  // the prefix of hi nodes fails
    bool any = false;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (state.try_keep({keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(mid)})) {
        hi = mid;
        any = true;
      } else {
        lo = mid + 1;
      }
    }
    return any;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_truncate_suffix_pass() {
  return std::make_unique<TruncateSuffix>();
}

}  // namespace crucible::minify
