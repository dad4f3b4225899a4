// Expected outputs of a test case and ONNX's comparison rule (see expected_outputs.h).
#include "expected_outputs.h"

#include <fmt/format.h>

#include <cmath>

#include "crucible/onnx/import.h"
#include "onnx_models.h"

namespace crucible {

std::vector<Tensor> load_expected_outputs(const std::string& dir) {
  std::vector<Tensor> out;
  for (const auto& f : case_files(dir, "output")) out.push_back(onnx::read_tensor_file(f));
  if (out.empty()) throw Error(fmt::format("{}: no output_0.pb", dir));
  return out;
}

reports::OutputAccuracy compare_expected(const Tensor& res, const Tensor& expected, double rtol,
                                         double atol) {
  reports::OutputAccuracy a;
  a.dtype = std::string(dtype_name(res.dtype()));
  a.shape = TensorType{res.dtype(), res.shape()}.str();
  if (res.dtype() != expected.dtype() || res.shape() != expected.shape()) {
    a.mismatches = std::max<int64_t>(res.numel(), 1);
    a.first_mismatch = 0;
    return a;
  }
  const std::vector<double> r = res.to_doubles(), e = expected.to_doubles();
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i]) && std::isnan(e[i])) continue;
    const double err = std::abs(r[i] - e[i]);
    const bool ok = r[i] == e[i] || err <= atol + rtol * std::abs(e[i]);
    if (std::isfinite(err)) {
      a.max_abs_err = std::max(a.max_abs_err, err);
      if (e[i] != 0) a.max_rel_err = std::max(a.max_rel_err, err / std::abs(e[i]));
    }
    if (!ok) {
      if (a.first_mismatch < 0) a.first_mismatch = static_cast<int64_t>(i);
      ++a.mismatches;
    }
  }
  a.passed = a.mismatches == 0;
  return a;
}

std::string expected_mismatch(const reports::OutputAccuracy& a, const Tensor& res,
                              const Tensor& expected, double rtol, double atol) {
  const TensorType rt{res.dtype(), res.shape()}, et{expected.dtype(), expected.shape()};
  if (!(rt == et))
    return fmt::format("output {} is {}, the test case expects {}", a.index, rt.str(), et.str());
  const int64_t i = a.first_mismatch;
  return fmt::format(
      "output {} ({}): {} of {} elements off the expected by more than atol {} + rtol {}, first "
      "at {} ({} vs {}), max abs error {:.3g}",
      a.index, rt.str(), a.mismatches, res.numel(), atol, rtol, i, res.get(i), expected.get(i),
      a.max_abs_err);
}

}  // namespace crucible
