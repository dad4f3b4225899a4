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
      const size_t sets = 1 + (given.fresh_sets >= 0 ? 1 + given.fresh_sets : 0);
      if (groups->size() == 2 * sets) {
        out.ref.eager = std::move((*groups)[0]);
        out.ref.fp64 = std::move((*groups)[1]);
        for (size_t k = 1; k < sets; ++k) {
          out.timing_sets.push_back(
              {std::move((*groups)[2 * k]), std::move((*groups)[2 * k + 1]), {}});
        }
        return out;
      }
      r.status = Status::kEagerFailToRun;
      r.error = fmt::format("the reference worker handed out {} groups of tensors, not {}",
                            groups->size(), 2 * sets);
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

namespace {

// The hand-off's files by backend (its index in the job) and input set (0: A, 1: B, 2 + j: fresh
// set j), from its index (job.tensors) and the files job.tensors + ".<n>" it names, each read (and
// removed) when judged; "" or why the index does not read. Untrusted: a plugin may have written
// them.
struct HandedOut {
  size_t backend = 0;
  int64_t set = 0;
  std::filesystem::path file;
};
std::string index_hand_off(const std::filesystem::path& index_file, size_t backends,
                           std::vector<HandedOut>& out) {
  std::string why = "the file is missing";
  const std::optional<TensorGroups> groups = take_tensors(index_file, why);
  if (!groups) return why;
  if (groups->size() != 1 || (*groups)[0].size() != 1) return "its index is not one tensor";
  const Tensor& index = (*groups)[0][0];
  if (index.dtype() != DType::kI64 || index.shape().size() != 2 || index.shape()[1] != 2)
    return "its index is not an int64 tensor [n, 2]";
  const auto* v = static_cast<const int64_t*>(index.raw_data());
  for (int64_t g = 0; g < index.shape()[0]; ++g) {
    const int64_t backend = v[2 * g], set = v[2 * g + 1];
    // At most one fresh set per round, and at most 100 x --repeat rounds: the bound keeps a
    // forged index from making the reference worker compute millions of sets.
    if (backend < 0 || static_cast<size_t>(backend) >= backends || set < 0 || set > 100'000)
      return fmt::format("entry {} names backend {} and input set {}", g, backend, set);
    out.push_back({static_cast<size_t>(backend), set,
                   std::filesystem::path(fmt::format("{}.{}", index_file.string(), g))});
  }
  return "";
}

// Removes what a timing worker left of its hand-off (one that died left files but no index).
void remove_hand_off(const std::filesystem::path& index_file) {
  std::error_code ec;
  const std::string prefix = index_file.filename().string() + ".";
  for (const auto& e : std::filesystem::directory_iterator(index_file.parent_path(), ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
  }
}

std::string set_name(int64_t set) {
  return set == 0 ? "A" : set == 1 ? "B" : fmt::format("fresh set {}", set - 2);
}

// The judge of one timing's hand-off: references on demand, made full on first need.
class HandOffJudge {
 public:
  HandOffJudge(const WorkerJob& job, ReferenceOutcome& reference, const CheckFiles& files,
               const CheckLaunch& launch, int64_t fresh_sets)
      : job_(job), reference_(reference), files_(files), launch_(launch), fresh_sets_(fresh_sets) {}

  // "" when `outputs` of `backend` on `set` pass, else why.
  std::string failure(const std::string& backend, int64_t set, const std::vector<Tensor>& outputs) {
    WorkerJob rule = job_;
    // The case's expected outputs are for set A, and eager is held to eager's own outputs.
    if (backend == "eager" || set > 0) rule.expected.clear();
    reports::ResultRecord verdict;
    std::string why = judge(rule, set, outputs, verdict, false);
    // Not allclose to eager: the rule's fp64 step needs the full reference, made now.
    if (why.empty() && verdict.status != Status::kPass && rule.expected.empty() && !full(set)) {
      why = judge(rule, set, outputs, verdict, true);
    }
    if (!why.empty()) return why;
    if (verdict.status == Status::kPass) return "";
    if (backend == "eager") {
      return fmt::format(
          "its outputs on input set {} in its timing worker are off eager's made outside it (a "
          "plugin wrote into them?): {}",
          set_name(set), verdict.error);
    }
    return fmt::format(
        "its outputs on input set {} in its timing worker fail against the reference made "
        "outside it: {}",
        set_name(set), verdict.error);
  }

 private:
  bool full(int64_t set) const { return set == 0 ? reference_.full : timing_ && timing_->full; }

  // Judges into `verdict`; returns why there is no reference to judge against, else "".
  std::string judge(const WorkerJob& rule, int64_t set, const std::vector<Tensor>& outputs,
                    reports::ResultRecord& verdict, bool need_full) {
    const AccuracyReference* ref = nullptr;
    if (set == 0) {
      if (need_full && !reference_.full) reference_ = compute_reference(job_, files_, launch_);
      if (reference_.failure) return "no reference to hold it to: " + reference_.failure->error;
      ref = &reference_.ref;
    } else {
      if (!timing_ || (need_full && !timing_->full)) {
        WorkerJob sets = job_;
        sets.fresh_sets = static_cast<int>(fresh_sets_);
        // Eager once on each set; fp64 only once an output is not allclose to eager's.
        timing_ = compute_reference(sets, files_, launch_, need_full);
      }
      if (timing_->failure)
        return "no reference on the timing's input sets: " + timing_->failure->error;
      ref = &timing_->timing_sets.at(static_cast<size_t>(set - 1));
    }
    verdict = reports::ResultRecord();
    judge_outputs(rule, *ref, outputs, verdict);
    return "";
  }

  const WorkerJob& job_;
  ReferenceOutcome& reference_;
  const CheckFiles& files_;
  const CheckLaunch& launch_;
  int64_t fresh_sets_;
  std::optional<ReferenceOutcome> timing_;
};

}  // namespace

void judge_timing_hand_off(const WorkerJob& job, ReferenceOutcome& reference,
                           const CheckFiles& reference_files, const CheckLaunch& launch,
                           std::vector<reports::ResultRecord>& results) {
  if (job.timing.no_audit) return;  // nothing handed out: every result says it is unaudited
  std::vector<HandedOut> handed;
  const std::string why = index_hand_off(job.tensors, job.backends.size(), handed);
  int64_t fresh_sets = 0;
  for (const HandedOut& h : handed) fresh_sets = std::max(fresh_sets, h.set - 1);
  HandOffJudge judge(job, reference, reference_files, launch, fresh_sets);
  for (reports::ResultRecord& r : results) {
    if (r.status != Status::kPass) continue;
    const auto at = std::find(job.backends.begin(), job.backends.end(), r.backend);
    if (at == job.backends.end()) continue;  // finalize_job gives one result per job backend
    const auto k = static_cast<size_t>(at - job.backends.begin());
    std::string failure;
    if (reference.failure)
      failure = "no reference to hold its outputs to: " + reference.failure->error;
    bool set_a = false;
    for (const HandedOut& h : handed) {
      if (!failure.empty()) break;
      if (h.backend != k) continue;
      set_a = set_a || h.set == 0;
      std::string unreadable;
      const std::optional<TensorGroups> outputs = take_tensors(h.file, unreadable);
      if (!outputs || outputs->size() != 1) {
        failure = fmt::format("its timing worker's hand-off {} does not read: {}",
                              h.file.filename().string(), unreadable);
      } else {
        failure = judge.failure(r.backend, h.set, (*outputs)[0]);
      }
    }
    if (failure.empty() && !set_a) {
      failure = "its timing worker handed out none of its checked outputs: " +
                (why.empty() ? std::string("no file on input set A") : why);
    }
    if (failure.empty()) continue;
    r.status = Status::kFailAccuracyInPerf;
    r.error = failure;
  }
  remove_hand_off(job.tensors);
}

}  // namespace crucible
