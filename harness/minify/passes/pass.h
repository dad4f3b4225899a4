// A delta pass of the minifier (llvm-reduce's shape): one way of proposing smaller candidates,
// each tried through ReduceState::try_keep. Passes are listed in registry.cpp, one file each.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../reducer.h"

namespace crucible::minify {

class ReductionPass {
 public:
  virtual ~ReductionPass() = default;
  virtual std::string name() const = 0;
  // Shrinks `state` as far as this pass can; returns whether it removed any node.
  virtual bool run(ReduceState& state) const = 0;
};

// The passes in the order the reducer runs them: cheap logarithmic cuts first, ddmin last.
const std::vector<std::unique_ptr<ReductionPass>>& reduction_passes();
// The passes that simplify data, not structure, run once the nodes are minimal.
const std::vector<std::unique_ptr<ReductionPass>>& data_passes();

std::unique_ptr<ReductionPass> make_single_output_pass();
std::unique_ptr<ReductionPass> make_truncate_suffix_pass();
std::unique_ptr<ReductionPass> make_truncate_prefix_pass();
std::unique_ptr<ReductionPass> make_ddmin_pass();
std::unique_ptr<ReductionPass> make_simplify_params_pass();
std::unique_ptr<ReductionPass> make_shrink_shapes_pass();
std::unique_ptr<ReductionPass> make_lower_dtypes_pass();

}  // namespace crucible::minify
