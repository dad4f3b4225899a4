// The minifier's passes, in the order they run (an explicit list: the harness is a static library,
// where self-registering objects would be dropped by the linker).
#include "pass.h"

namespace crucible::minify {

const std::vector<std::unique_ptr<ReductionPass>>& reduction_passes() {
  static const auto* passes = [] {
    auto* v = new std::vector<std::unique_ptr<ReductionPass>>;
    v->push_back(make_single_output_pass());
    v->push_back(make_truncate_suffix_pass());
    v->push_back(make_truncate_prefix_pass());
    v->push_back(make_ddmin_pass());
    return v;
  }();
  return *passes;
}

const std::vector<std::unique_ptr<ReductionPass>>& data_passes() {
  static const auto* passes = [] {
    auto* v = new std::vector<std::unique_ptr<ReductionPass>>;
    v->push_back(make_simplify_params_pass());
    v->push_back(make_lower_dtypes_pass());
    v->push_back(make_shrink_shapes_pass());
    return v;
  }();
  return *passes;
}

}  // namespace crucible::minify
