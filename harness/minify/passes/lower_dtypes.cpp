// Dtype lowering: the candidate's f64 inputs become f32 and its i64 inputs i32, one dtype at a
// time, node types inferred again, kept while the failure holds (for an accuracy failure the
// signature names the failing output's dtype, so a lowering that changes it is refused).
#include "pass.h"

namespace crucible::minify {

namespace {

class LowerDtypes : public ReductionPass {
 public:
  std::string name() const override { return "lower_dtypes"; }
  bool run(ReduceState& state) const override {
    for (const auto& [from, to] :
         {std::pair{DType::kF64, DType::kF32}, {DType::kI64, DType::kI32}}) {
      const Candidate c = state.candidate();
      std::vector<Tensor> inputs = c.inputs;
      bool any = false;
      for (Tensor& t : inputs) {
        if (t.dtype() != from) continue;
        t = t.to(to);
        any = true;
      }
      if (!any) continue;
      if (auto next = with_inputs(c, std::move(inputs))) state.try_candidate(std::move(*next));
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<ReductionPass> make_lower_dtypes_pass() { return std::make_unique<LowerDtypes>(); }

}  // namespace crucible::minify
