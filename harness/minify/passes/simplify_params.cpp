// Constant zeroing: each parameter the kept nodes read is tried as zeros(), then as ones(), and
// keeps the simpler recipe when the failure holds, so a repro shows which weights matter.
// It removes no node; it runs once the nodes are minimal (data_passes()).
#include <set>

#include "pass.h"

namespace crucible::minify {

namespace {

class SimplifyParams : public ReductionPass {
 public:
  std::string name() const override { return "simplify_params"; }
  bool run(ReduceState& state) const override {
    const Graph& g = state.graph();
    std::set<ValueId> read;
    for (int ni : state.keep()) {
      for (ValueId op : g.nodes()[ni].operands) {
        if (g.value(op).kind == ValueKind::kParam) read.insert(op);
      }
    }
    for (ValueId p : read) {
      if (state.param_overrides().contains(p)) continue;
      for (const char* kind : {"zeros", "ones"}) {
        const Initializer& init = g.value(p).init;
        if (init.kind == kind && !g.value(p).data.defined()) break;  // already that simple
        ParamOverrides next = state.param_overrides();
        next[p] = Initializer{kind, {}};
        if (state.try_params(std::move(next))) break;
      }
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_simplify_params_pass() {
  return std::make_unique<SimplifyParams>();
}

}  // namespace crucible::minify
