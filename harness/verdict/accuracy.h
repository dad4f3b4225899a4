// The accuracy rule of PyTorch's benchmark harness (torch._dynamo.utils.same), applied per output:
// allclose against eager first; failing that, the result passes if it is not much farther from an
// fp64 reference than eager itself is. Integer and bool outputs must match exactly.
#pragma once

#include <string>

#include "crucible/core/tensor.h"
#include "crucible/reports/records.h"

namespace crucible {

struct AccuracyOptions {
  double tol = 1e-4;      // rtol = atol = tol
  bool cosine = false;    // pass iff cosine similarity with eager >= 0.99 instead of allclose/RMSE
  bool equal_nan = true;  // NaN in the same place on both sides counts as equal
  // atol = tol * scale. A training step's rule sets it to the root mean square of all its
  // outputs (output_scale), so that a step is judged alike at any scale; a tensor's own RMS would
  // not do: a gradient that is zero in exact arithmetic (an attention key's bias) is rounding
  // noise on every backend, and no noise is within a fraction of itself.
  double scale = 1.0;
};

// The root mean square of every finite element of the floating tensors of `outputs` (1 when
// there is none, or all are zero): the scale a training step's outputs are judged at.
double output_scale(const std::vector<Tensor>& outputs);

// Compares a backend's output `res` with eager's `ref` and the fp64 reference `fp64` (same shape;
// fp64 may be undefined, e.g. for integer outputs). Fills every figure of OutputAccuracy. `spread`
// holds more f32 runs of the output (eager on inputs moved by one rounding) where one eager run is
// one draw of a spread: eager's RMSE against fp64, the rule's yardstick, is then the largest of
// them all.
reports::OutputAccuracy compare_output(const Tensor& res, const Tensor& ref, const Tensor& fp64,
                                       const AccuracyOptions& opts,
                                       const std::vector<Tensor>& spread = {});

// The rule's RMSE multiplier m for an output: 3 for bf16 or under 1,000 elements, else 2.
double rmse_multiplier(const Tensor& res);

// A passing floating output that still smells: its RMSE against fp64 is over m x eager's (plus
// tol/1000, so an eager that happens to be exact does not flag ordinary rounding). PyTorch's rule
// passes such an output as soon as it is allclose to eager.
bool pass_suspicious(const reports::OutputAccuracy& a, const Tensor& res,
                     const AccuracyOptions& opts);

// The rule's allclose step alone on two contiguous float32 outputs of one shape, in one pass
// without copies (compare_output converts both to doubles: 250 ms on 8 Mi elements, 10 ms here),
// for the timing audit's many checks. True when every element passes; `max_abs_err` gets the
// largest |res - ref| either way. False too for other dtypes, shapes or layouts: use
// compare_output.
bool allclose_f32(const Tensor& res, const Tensor& ref, const AccuracyOptions& opts,
                  double* max_abs_err);

// Bitwise equality, with NaNs of any payload equal (the eager-twice determinism check).
bool identical(const Tensor& a, const Tensor& b);

}  // namespace crucible
