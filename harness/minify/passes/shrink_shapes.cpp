// Shape shrinking: halve one dimension of the candidate's inputs (every input that has the same
// size at the same position from the right, so broadcasting partners shrink together), keeping
// their first half, while the failure holds. Node types are inferred again; a graph whose ops fix
// a shape (reshape targets, parameters) rejects the halving and it is not tried. Halvings stop
// at kCallBudget oracle calls: each accepted one costs two, and a repro of a few thousand elements
// reads as well as one of four.
#include <map>

#include "pass.h"

namespace crucible::minify {

namespace {

constexpr int kCallBudget = 4;

// `c` with input k's dimension halve[k] halved (its first half kept); nullopt when the graph's
// ops do not accept the new shapes.
std::optional<Candidate> halved(const Candidate& c, const std::map<size_t, size_t>& halve) {
  std::vector<Tensor> inputs = c.inputs;
  for (const auto& [k, d] : halve) {
    const int64_t dim = static_cast<int64_t>(d);
    inputs[k] = inputs[k].slice(dim, 0, inputs[k].shape()[d] / 2).contiguous();
  }
  return with_inputs(c, std::move(inputs));
}

class ShrinkShapes : public ReductionPass {
 public:
  std::string name() const override { return "shrink_shapes"; }
  bool run(ReduceState& state) const override {
    const int start = state.oracle().calls();
    for (bool changed = true; changed && state.oracle().calls() - start < kCallBudget;) {
      changed = false;
      const Candidate c = state.candidate();
      // Each (position from the right, size) any input has, largest sizes first.
      std::map<std::pair<int64_t, size_t>, std::map<size_t, size_t>, std::greater<>> groups;
      for (size_t k = 0; k < c.inputs.size(); ++k) {
        const Shape& s = c.graph.value(c.graph.inputs()[k]).type.shape;
        for (size_t d = 0; d < s.size(); ++d) {
          if (s[d] >= 2) groups[{s[d], s.size() - d}][k] = d;
        }
      }
      for (const auto& [key, halve] : groups) {
        if (state.oracle().calls() - start >= kCallBudget) break;
        std::optional<Candidate> next = halved(c, halve);
        if (next && state.try_candidate(std::move(*next))) {
          changed = true;
          break;
        }
      }
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_shrink_shapes_pass() {
  return std::make_unique<ShrinkShapes>();
}

}  // namespace crucible::minify
