// The mirror of truncate_suffix: the longest run of leading kept nodes that can be replaced by
// their recorded eager values (fed as inputs) while the rest still fails. O(log n) oracle calls.
#include "pass.h"

namespace crucible::minify {

namespace {

class TruncatePrefix : public ReductionPass {
 public:
  std::string name() const override { return "truncate_prefix"; }
  bool run(ReduceState& state) const override {
    const std::vector<int> keep = state.keep();
    if (keep.size() < 2) return false;
    size_t lo = 0, hi = keep.size() - 1;  // dropping lo leading nodes still fails
    bool any = false;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo + 1) / 2;
      if (state.try_keep({keep.begin() + static_cast<std::ptrdiff_t>(mid), keep.end()})) {
        lo = mid;
        any = true;
      } else {
        hi = mid - 1;
      }
    }
    return any;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_truncate_prefix_pass() {
  return std::make_unique<TruncatePrefix>();
}

}  // namespace crucible::minify
