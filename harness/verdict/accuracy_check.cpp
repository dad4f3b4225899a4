// The out-of-process accuracy check (see accuracy_check.h).
#include "accuracy_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "crucible/core/error.h"
#include "expected_outputs.h"
#include "tensor_file.h"

namespace crucible {

namespace {

using reports::Status;

// The tensors a worker handed out, then their file gone. A file that does not read (a plugin may
// have written anything there) gives nullopt and `why`.
std::optional<TensorGroups> take_tensors(const std::filesystem::path& path, std::string& why) {
  std::optional<TensorGroups> groups;
  try {
    groups = read_tensor_file(path);
  } catch (const Error& e) {
    why = e.what();
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  return groups;
}

// The same, where a file that does not read is `r`'s failure with `status`.
std::optional<TensorGroups> take_tensors(const std::filesystem::path& path,
                                         reports::ResultRecord& r, Status status) {
  std::string why;
  auto groups = take_tensors(path, why);
  if (!groups) {
    r.status = status;
    r.error = why;
  }
  return groups;
}

// The reference worker's failure as the result of a backend judged against it.
reports::ResultRecord reference_failure_for(const reports::ResultRecord& failure,
                                            const WorkerJob& job) {
  reports::ResultRecord r = failure;
  r.backend = job.backends.at(0);
  r.mode = "accuracy";
  r.backend_version.clear();
  if (r.status == Status::kCrash || r.status == Status::kFailToRun) {
    r.status = Status::kEagerFailToRun;
    r.error = "the eager reference: " + r.error;
  }
  return r;
}

}  // namespace

ReferenceOutcome compute_reference(const WorkerJob& given, const CheckFiles& files,
                                   const CheckLaunch& launch, bool full) {
  ReferenceOutcome out;
  out.full = full;
  reports::ResultRecord r =
      reports::make_result(given.suite, given.model, "eager", "accuracy", given.batch_size);
  if (!given.expected.empty()) {
    try {
      out.ref.expected = load_expected_outputs(given.expected);
    } catch (const Error& e) {
      r.status = Status::kFailToLoad;
      r.error = e.what();
      out.failure = r;
      return out;
    }
  }
  WorkerJob job = given;
  job.job = "reference";
  job.backends = {"eager"};
  job.want_fp64 = full && (given.expected.empty() || given.fp64_check);
  job.eager_once = !full;
  job.expected.clear();  // the worker needs none of the case's files
  job.tensors = files.tensors.string();
  WorkerRun w = run_worker(job, files.worker, launch.env, launch.limits);
  r = w.results.at(0);
  if (r.status == Status::kPass) {
    if (auto groups = take_tensors(files.tensors, r, Status::kEagerFailToRun)) {
      if (groups->size() == 2) {
        out.ref.eager = std::move((*groups)[0]);
        out.ref.fp64 = std::move((*groups)[1]);
        return out;
      }
      r.status = Status::kEagerFailToRun;
      r.error = fmt::format("the reference worker handed out {} groups of tensors, not 2",
                            groups->size());
    }
  }
  out.failure = r;
  return out;
}

reports::ResultRecord check_accuracy(const WorkerJob& given, const ReferenceOutcome& reference,
                                     const CheckFiles& files, const CheckLaunch& launch) {
  if (reference.failure) return reference_failure_for(*reference.failure, given);
  WorkerJob job = given;
  job.job = "outputs";
  job.backends = {given.backends.at(0)};
  job.expected.clear();  // the plugin's process never sees where the expected outputs are
  job.tensors = files.tensors.string();
  WorkerRun w = run_worker(job, files.worker, launch.env, launch.limits);
  reports::ResultRecord r = w.results.at(0);
  // The worker's `pass` only says that it ran; the verdict is reached here.
  if (r.status != Status::kPass) return r;
  auto groups = take_tensors(files.tensors, r, Status::kFailToRun);
  if (!groups) return r;
  if (groups->size() != 1) {
    r.status = Status::kFailToRun;
    r.error =
        fmt::format("the backend's worker handed out {} groups of tensors, not 1", groups->size());
    return r;
  }
  WorkerJob rule = given;  // judged by the rule of the model (its expected outputs included)
  judge_outputs(rule, reference.ref, (*groups)[0], r);
  return r;
}

// One backend's hand-off judged: "" when it passes, else why. The eager baseline is held to
// eager's own outputs; the others to the model's rule, a test case's expected outputs included.
std::string hand_off_failure(const WorkerJob& job, ReferenceOutcome& reference,
                             const CheckFiles& reference_files, const CheckLaunch& launch,
                             const reports::ResultRecord& r, const std::vector<Tensor>& outputs) {
  WorkerJob rule = job;
  if (r.backend == "eager") rule.expected.clear();
  reports::ResultRecord verdict = r;
  judge_outputs(rule, reference.ref, outputs, verdict);
  // Not allclose to eager: the rule's fp64 step needs the full reference, made now.
  if (verdict.status != Status::kPass && !reference.full && rule.expected.empty()) {
    reference = compute_reference(job, reference_files, launch);
    if (reference.failure) return "no full reference: " + reference.failure->error;
    verdict = r;
    judge_outputs(rule, reference.ref, outputs, verdict);
  }
  if (verdict.status == Status::kPass) return "";
  if (r.backend == "eager") {
    return fmt::format(
        "its outputs on input set A in the timing worker it shared with {} are off eager's made "
        "outside it (a plugin wrote into them?): {}",
        fmt::join(job.backends.begin() + 1, job.backends.end(), ", "), verdict.error);
  }
  return "its outputs on input set A in the timing worker fail against the reference made "
         "outside it: " +
         verdict.error;
}

void judge_timing_hand_off(const WorkerJob& job, ReferenceOutcome& reference,
                           const CheckFiles& reference_files, const CheckLaunch& launch,
                           std::vector<reports::ResultRecord>& results) {
  if (job.timing.no_audit) return;  // nothing handed out: every result says it is unaudited
  std::string why = "the file is missing";
  const std::optional<TensorGroups> groups = take_tensors(job.tensors, why);
  for (reports::ResultRecord& r : results) {
    if (r.status != Status::kPass) continue;
    const auto at = std::find(job.backends.begin(), job.backends.end(), r.backend);
    if (at == job.backends.end()) continue;  // finalize_job gives one result per job backend
    const auto k = static_cast<size_t>(at - job.backends.begin());
    std::string failure;
    if (reference.failure) {
      failure = "no reference to hold its outputs to: " + reference.failure->error;
    } else if (!groups || groups->size() != job.backends.size() || (*groups)[k].empty()) {
      failure = "the timing worker handed out none of its checked outputs: " + why;
    } else {
      failure = hand_off_failure(job, reference, reference_files, launch, r, (*groups)[k]);
    }
    if (failure.empty()) continue;
    r.status = Status::kFailAccuracyInPerf;
    r.error = failure;
  }
}

}  // namespace crucible
