// Shape shrinking: halve one dimension of the candidate's inputs (every input that has the same
// size at the same position from the right, so broadcasting partners shrink together), keeping
// their first half, while the failure holds. Node types are inferred again; a graph whose ops fix
// a shape (reshape targets, parameters) rejects the halving and it is not tried. Halvings stop
// at kCallBudget oracle calls: each accepted one costs two, and a repro of a few thousand elements
// reads as well as one of four.
#include <map>

#include "crucible/core/error.h"
#include "pass.h"

namespace crucible::minify {

namespace {

constexpr int kCallBudget = 4;

// `c` with input k's dimension halve[k] halved (its first half kept); nullopt when the graph's
// ops do not accept the new shapes.
std::optional<Candidate> halved(const Candidate& c, const std::map<size_t, size_t>& halve) {
  const Graph& g = c.graph;
  Candidate out{Graph(g.name()), {}};
  out.graph.set_base_dir(g.base_dir());
  std::map<ValueId, ValueId> to_new;
  try {
    for (size_t k = 0; k < g.inputs().size(); ++k) {
      const Value& v = g.value(g.inputs()[k]);
      TensorType t = v.type;
      Tensor data = c.inputs[k];
      if (auto h = halve.find(k); h != halve.end()) {
        const int64_t d = static_cast<int64_t>(h->second);
        t.shape[h->second] /= 2;
        data = data.slice(d, 0, t.shape[h->second]).contiguous();
      }
      to_new[g.inputs()[k]] = out.graph.add_input(v.name, t);
      out.inputs.push_back(data);
    }
    for (ValueId p : g.params()) {
      const Value& v = g.value(p);
      to_new[p] = v.data.defined() ? out.graph.add_param_data(v.name, v.data)
                                   : out.graph.add_param(v.name, v.type, v.init);
    }
    for (const Node& n : g.nodes()) {
      std::vector<ValueId> ops;
      for (ValueId o : n.operands) ops.push_back(to_new.at(o));
      to_new[n.output] = out.graph.add_node(n.op, ops, n.attrs, g.value(n.output).name);
    }
    std::vector<ValueId> outs;
    for (ValueId o : g.outputs()) outs.push_back(to_new.at(o));
    out.graph.set_outputs(outs);
    verify(out.graph);
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
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
