// The out-of-process accuracy check (see accuracy_check.h).
#include "accuracy_check.h"

#include <fmt/format.h>

#include "crucible/core/error.h"
#include "expected_outputs.h"
#include "tensor_file.h"

namespace crucible {

namespace {

using reports::Status;

// The tensors a worker handed out, then their file gone. A file that does not read (a plugin may
// have written anything there) is the worker's failure to run.
std::optional<TensorGroups> take_tensors(const std::filesystem::path& path,
                                         reports::ResultRecord& r, Status status) {
  std::optional<TensorGroups> groups;
  try {
    groups = read_tensor_file(path);
  } catch (const Error& e) {
    r.status = status;
    r.error = e.what();
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
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

}  // namespace crucible
