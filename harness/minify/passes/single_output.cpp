// Keeps one output's cone: for each output of the candidate, the nodes it alone depends on.
#include <set>

#include "pass.h"

namespace crucible::minify {

namespace {

// The kept nodes `sink` depends on (itself included), ascending.
std::vector<int> cone(const Graph& g, const std::vector<int>& keep, int sink) {
  const std::set<int> kept(keep.begin(), keep.end());
  std::set<int> in{sink};
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) {
    if (!in.contains(*it)) continue;
    for (ValueId op : g.nodes()[*it].operands) {
      const Value& v = g.value(op);
      if (v.kind == ValueKind::kNode && kept.contains(v.node)) in.insert(v.node);
    }
  }
  return {in.begin(), in.end()};
}

// The kept nodes whose values the candidate returns: returned by the original, or read by no kept
// node.
std::vector<int> sinks(const Graph& g, const std::vector<int>& keep) {
  const std::set<int> kept(keep.begin(), keep.end());
  std::set<ValueId> read;
  for (int ni : keep) read.insert(g.nodes()[ni].operands.begin(), g.nodes()[ni].operands.end());
  const std::set<ValueId> returned(g.outputs().begin(), g.outputs().end());
  std::vector<int> out;
  for (int ni : keep) {
    const ValueId v = g.nodes()[ni].output;
    if (returned.contains(v) || !read.contains(v)) out.push_back(ni);
  }
  return out;
}

class SingleOutput : public ReductionPass {
 public:
  std::string name() const override { return "single_output"; }
  bool run(ReduceState& state) const override {
    bool any = false;
    for (bool changed = true; changed;) {
      changed = false;
      const std::vector<int> keep = state.keep();
      const std::vector<int> outs = sinks(state.graph(), keep);
      if (outs.size() < 2) break;
      std::vector<std::vector<int>> cones;
      for (auto it = outs.rbegin(); it != outs.rend(); ++it) {
        cones.push_back(cone(state.graph(), keep, *it));
      }
      changed = state.try_first(cones) >= 0;
      any = any || changed;
    }
    return any;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_single_output_pass() {
  return std::make_unique<SingleOutput>();
}

}  // namespace crucible::minify
