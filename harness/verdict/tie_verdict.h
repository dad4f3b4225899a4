// The reference a backend's outputs meet again after failing where ties (comparison_ties.h) may
// have gone the other way: fp64 and eager moved by the effects of the ties that explain them.
#pragma once

#include <vector>

#include "accuracy_verdict.h"
#include "crucible/core/tensor.h"

namespace crucible {

// `ref` with the effects (flipped[i] - ref.fp64, each an fp64 run with tie i decided the other
// way) of the ties that best explain `res` added to its fp64 and its eager outputs: chosen one at
// a time while one lowers the squared distance of `res` to fp64 over all floating outputs, as
// many as that takes (`chosen`, indices into `flipped`). The outputs can then only pass as an
// outcome the reference itself reaches with those ties decided the other way.
AccuracyReference shifted_by_ties(const AccuracyReference& ref,
                                  const std::vector<std::vector<Tensor>>& flipped,
                                  const std::vector<Tensor>& res, std::vector<size_t>& chosen);

}  // namespace crucible
