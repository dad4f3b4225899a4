// Expected outputs that come with a model (an ONNX test case's output_N.pb): loading them and
// ONNX's comparison rule, |res - exp| <= atol + rtol * |exp| with NaN matching NaN.
#pragma once

#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/reports/records.h"

namespace crucible {

// output_0.pb, output_1.pb, ... of `dir`, in order. Throws Error naming a file that does not read.
std::vector<Tensor> load_expected_outputs(const std::string& dir);

// Dtype and shape must match; then every element by ONNX's rule (bool and integers too, as
// numpy's assert_allclose does). Fills max_abs_err, max_rel_err, mismatches, first_mismatch.
reports::OutputAccuracy compare_expected(const Tensor& res, const Tensor& expected, double rtol,
                                         double atol);

// One line for a failed output: what differs, where, and by how much.
std::string expected_mismatch(const reports::OutputAccuracy& a, const Tensor& res,
                              const Tensor& expected, double rtol, double atol);

}  // namespace crucible
