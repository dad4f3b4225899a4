// Judges a backend's outputs against a reference (see accuracy_verdict.h).
#include "accuracy_verdict.h"

#include <fmt/format.h>

#include <algorithm>

#include "accuracy.h"
#include "expected_outputs.h"

namespace crucible {

namespace {

using reports::Status;

void fail(reports::ResultRecord& r, std::string why) {
  if (r.status != Status::kPass) return;  // the first failure names the result
  r.status = Status::kFailAccuracy;
  r.error = std::move(why);
}

// With fp64_check, eager is also held to the fp64 reference and the backend to the rule it meets
// in any other suite, so a case passes against both references.
void check_fp64_too(const WorkerJob& job, const AccuracyReference& ref, const Tensor& res, size_t i,
                    reports::OutputAccuracy& a, reports::ResultRecord& r) {
  if (!job.fp64_check || i >= ref.fp64.size() || !ref.fp64[i].defined() || i >= ref.eager.size())
    return;
  const AccuracyOptions opts{std::max(job.rtol, job.atol), false, true};
  const auto f = compare_output(res, ref.eager[i], ref.fp64[i], opts);
  const auto eager_fp64 =
      compare_expected(ref.eager[i], ref.fp64[i].to(ref.eager[i].dtype()), opts.tol, opts.tol);
  a.rmse_vs_fp64 = f.rmse_vs_fp64;
  a.rmse_eager_vs_fp64 = f.rmse_eager_vs_fp64;
  if (!eager_fp64.passed) {
    fail(r, fmt::format("output {}: eager is off the fp64 reference by {:.3g} (tolerance {})", i,
                        eager_fp64.max_abs_err, opts.tol));
  } else if (!f.passed) {
    fail(r, fmt::format("output {}: off eager and fp64 by the usual rule, max abs error {:.3g}", i,
                        f.max_abs_err));
  }
}

// An ONNX test case's verdict: each output against its output_N.pb by ONNX's rule.
void judge_against_expected(const WorkerJob& job, const AccuracyReference& ref,
                            const std::vector<Tensor>& res, reports::ResultRecord& r) {
  if (res.size() != ref.expected.size()) {
    return fail(
        r, fmt::format("{} outputs, the test case expects {}", res.size(), ref.expected.size()));
  }
  for (size_t i = 0; i < res.size(); ++i) {
    auto a = compare_expected(res[i], ref.expected[i], job.rtol, job.atol);
    a.index = static_cast<int>(i);
    if (!a.passed) fail(r, expected_mismatch(a, res[i], ref.expected[i], job.rtol, job.atol));
    check_fp64_too(job, ref, res[i], i, a, r);
    r.accuracy.push_back(a);
  }
}

void judge_against_eager(const WorkerJob& job, const AccuracyReference& ref,
                         const std::vector<Tensor>& res, reports::ResultRecord& r) {
  if (res.size() != ref.eager.size()) {
    return fail(r, fmt::format("{} outputs, eager gives {}", res.size(), ref.eager.size()));
  }
  const AccuracyOptions opts{job.tolerance, job.cosine, true,
                             job.scaled_tolerance ? output_scale(ref.eager) : 1.0};
  for (size_t i = 0; i < res.size(); ++i) {
    const Tensor fp64 = i < ref.fp64.size() ? ref.fp64[i] : Tensor();
    std::vector<Tensor> spread;
    if (i < ref.after_update.size() && ref.after_update[i]) {
      for (const std::vector<Tensor>& run : ref.spread) {
        if (i < run.size()) spread.push_back(run[i]);
      }
    }
    auto a = compare_output(res[i], ref.eager[i], fp64, opts, spread);
    a.index = static_cast<int>(i);
    if (!a.passed) {
      // A training step's outputs are many (losses, gradients, parameters): the name says which.
      const std::string name = i < ref.names.size() ? " %" + ref.names[i] : "";
      fail(r, fmt::format(
                  "output {}{} ({}{}): {} of {} elements differ, first at {}, max abs error {:.3g}",
                  i, name, a.dtype, a.shape, a.mismatches, res[i].numel(), a.first_mismatch,
                  a.max_abs_err));
    }
    r.pass_suspicious = r.pass_suspicious || pass_suspicious(a, res[i], opts);
    r.accuracy.push_back(a);
  }
  if (r.status != Status::kPass) r.pass_suspicious = false;
}

}  // namespace

void judge_outputs(const WorkerJob& job, const AccuracyReference& ref,
                   const std::vector<Tensor>& res, reports::ResultRecord& r) {
  r.status = Status::kPass;
  r.error.clear();
  r.accuracy.clear();
  r.pass_suspicious = false;
  if (!job.expected.empty()) return judge_against_expected(job, ref, res, r);
  judge_against_eager(job, ref, res, r);
}

}  // namespace crucible
