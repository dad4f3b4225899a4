// The out-of-process accuracy check (see accuracy_check.h).
#include "accuracy_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "comparison_ties.h"
#include "crucible/core/error.h"
#include "crucible/ir/gradients.h"
#include "crucible/ir/text_format.h"
#include "expected_outputs.h"
#include "input_sets.h"
#include "output_sample.h"
#include "tensor_file.h"
#include "tie_verdict.h"
#include "turn_channel.h"

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

namespace {

// The names of the graph's outputs and which come after an update (outputs_after_an_update), read
// here where no plugin is loaded; none when it does not read (the reference worker read it, so
// only a file changed since then fails).
struct GraphOutputs {
  std::vector<std::string> names;
  std::vector<bool> after_update;
};
GraphOutputs graph_outputs(const std::string& graph) {
  GraphOutputs out;
  try {
    const Graph g = load_graph_file(graph);
    for (ValueId v : g.outputs()) out.names.push_back(g.value(v).name);
    out.after_update = outputs_after_an_update(g);
  } catch (const Error&) {
    out = {};
  }
  return out;
}

}  // namespace

namespace {

// A failed verdict on a graph that compares floats: a worker of its own finds the ties
// (comparison_ties.h) and decides each the other way in fp64; the outputs are judged again
// against the reference moved by the ties that explain them (tie_verdict.h). Either way r.error
// says what the ties did.
struct TieInputs {
  bool timing_set = false;     // the timing's set B, or with `call` that call's inputs
  std::vector<uint64_t> call;  // one call id: the outputs are its sampled elements
  uint64_t verify_secret = 0;  // of those elements
};
void judge_at_ties(const WorkerJob& rule, const AccuracyReference& ref,
                   const std::vector<Tensor>& res, const CheckFiles& files,
                   const CheckLaunch& launch, reports::ResultRecord& r, const TieInputs& on = {}) {
  if (ref.fp64.empty() || !rule.expected.empty() || rule.cosine) return;
  Graph g;
  try {
    g = load_graph_file(rule.graph);
  } catch (const Error&) {
    return;  // the reference worker read it: only a file changed since then fails here
  }
  if (!has_float_comparison(g)) return;
  WorkerJob job = rule;
  job.job = "ties";
  job.backends = {"eager"};
  job.timing_sets = on.timing_set;
  job.call_sets = on.call;
  job.verify_secret = on.verify_secret;
  job.budget_s = launch.limits.timeout_s;
  job.tensors = files.tensors.string() + ".ties";
  const std::filesystem::path& log = files.worker.log;
  const WorkerFiles ties_files{files.worker.report.string() + ".ties",
                               log.parent_path() / (log.stem().string() + ".ties.log")};
  const WorkerRun w = run_worker(job, ties_files, launch.env, launch.limits);
  if (w.results.at(0).status != Status::kPass) {
    r.error += "; its ties were not checked: " + w.results.at(0).error;
    return;
  }
  std::string why = "the file is missing";
  const std::optional<TensorGroups> groups = take_tensors(job.tensors, why);
  if (!groups || groups->empty() || groups->back().size() != 3) {
    r.error += "; its ties did not read: " + why;
    return;
  }
  const Tensor &where = groups->back()[0], &band = groups->back()[1];
  const auto total = static_cast<int64_t>(groups->back()[2].get(0));
  const std::vector<std::vector<Tensor>> flipped(groups->begin(), groups->end() - 1);
  if (flipped.empty()) {
    r.error += total > 0 ? fmt::format(
                               "; its {} ties were not decided: one fp64 run more did not "
                               "fit in the worker's {:.0f} s",
                               total, launch.limits.timeout_s)
                         : "; no comparison in the graph is within f32 rounding of its boundary";
    return;
  }
  const auto n = static_cast<int64_t>(flipped.size());
  for (int64_t k = 0; k < n && where.numel() == 2 * n && band.numel() == 2 * n; ++k) {
    const double node = where.get(2 * k);
    if (node < 0 || node >= static_cast<double>(g.nodes().size())) {
      r.error += fmt::format("; its ties did not read: tie {} names node {}", k, node);
      return;
    }
  }
  if (where.numel() != 2 * n || band.numel() != 2 * n) {
    r.error += fmt::format("; its ties did not read: {} ties, {} and {} figures", n, where.numel(),
                           band.numel());
    return;
  }
  std::vector<size_t> chosen;
  const AccuracyReference moved = shifted_by_ties(ref, flipped, res, chosen);
  std::vector<std::string> which;
  for (size_t c : chosen) {
    const auto k = static_cast<int64_t>(c);
    which.push_back(describe_tie(
        g, {static_cast<int>(where.get(2 * k)), static_cast<int64_t>(where.get(2 * k + 1)),
            band.get(2 * k), band.get(2 * k + 1)}));
  }
  const std::string tried = fmt::format(
      "{} of the graph's {} ties (comparisons within f32 rounding of their boundary) tried the "
      "other way in fp64{}",
      flipped.size(), total,
      flipped.size() < std::min<size_t>(static_cast<size_t>(total), kMaxTies)
          ? fmt::format(", as many as fit in the worker's {:.0f} s", launch.limits.timeout_s)
          : "");
  if (chosen.empty()) {
    r.error += fmt::format("; {}: none explains it", tried);
    return;
  }
  reports::ResultRecord again = r;
  judge_outputs(rule, moved, res, again);
  const std::string explained = fmt::format("{} the other way explain{} it", fmt::join(which, ", "),
                                            chosen.size() == 1 ? "s" : "");
  if (again.status == Status::kPass) {
    r = again;
    r.error = fmt::format("pass at ties: {} ({})", explained, tried);
  } else {
    r.error = fmt::format("{} (with {}; {})", again.error, explained, tried);
  }
}

// `outputs` judged by `rule` against `ref` and, failing, at their ties (judge_at_ties): "" when
// they pass, else why not.
std::string judge_with_ties(const WorkerJob& rule, const AccuracyReference& ref,
                            const std::vector<Tensor>& outputs, const CheckFiles& files,
                            const CheckLaunch& launch, const TieInputs& on = {}) {
  reports::ResultRecord verdict;
  judge_outputs(rule, ref, outputs, verdict);
  if (verdict.status == Status::kFailAccuracy)
    judge_at_ties(rule, ref, outputs, files, launch, verdict, on);
  return verdict.status == Status::kPass ? "" : verdict.error;
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
      const size_t sets = 1 + (given.timing_sets ? 1 + given.call_sets.size() : 0);
      GraphOutputs outputs = graph_outputs(given.graph);
      const bool after = std::find(outputs.after_update.begin(), outputs.after_update.end(),
                                   true) != outputs.after_update.end();
      const size_t spread = job.want_fp64 && after ? kSpreadRuns : 0;
      if (groups->size() == 2 * sets + spread) {
        out.ref.eager = std::move((*groups)[0]);
        out.ref.fp64 = std::move((*groups)[1]);
        out.ref.names = std::move(outputs.names);
        out.ref.after_update = std::move(outputs.after_update);
        for (size_t k = 1; k < sets; ++k) {
          AccuracyReference& set = out.timing_sets.emplace_back();
          set.eager = std::move((*groups)[2 * k]);
          set.fp64 = std::move((*groups)[2 * k + 1]);
        }
        for (size_t k = 0; k < spread; ++k)
          out.ref.spread.push_back(std::move((*groups)[2 * sets + k]));
        return out;
      }
      r.status = Status::kEagerFailToRun;
      r.error = fmt::format("the reference worker handed out {} groups of tensors, not {}",
                            groups->size(), 2 * sets + spread);
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
  if (r.status == Status::kFailAccuracy)
    judge_at_ties(rule, reference.ref, (*groups)[0], files, launch, r);
  return r;
}

namespace {

// The hand-off's files by backend (its index in the job) and input set (0: A, 1: B), from its
// index (job.tensors) and the files job.tensors + ".<n>" it names, each read (and removed) when
// judged; "" or why the index does not read. Untrusted: a plugin may have written them.
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
  if (index.dtype() != DType::kI64 || index.shape().size() != 2 || index.shape()[1] != 2 ||
      index.shape()[0] > 2 * static_cast<int64_t>(backends))
    return "its index is not an int64 tensor [n, 2] of two sets per backend";
  const auto* v = static_cast<const int64_t*>(index.raw_data());
  for (int64_t g = 0; g < index.shape()[0]; ++g) {
    const int64_t backend = v[2 * g], set = v[2 * g + 1];
    if (backend < 0 || static_cast<size_t>(backend) >= backends || (set != 0 && set != 1))
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

// The references a timing's judge needs beyond set A's: set B's and the read calls', made by one
// reference worker: eager once first, fp64 too once a verdict needs the rule's fp64 step.
class TimingReference {
 public:
  TimingReference(const WorkerJob& job, const CheckFiles& files, const CheckLaunch& launch,
                  std::vector<uint64_t> calls, uint64_t secret)
      : files_(files), launch_(launch) {
    job_ = job;
    job_.timing_sets = true;
    job_.call_sets = std::move(calls);
    job_.verify_secret = secret;
  }
  // [0]: set B, [1 + i]: call_sets[i]; nullptr and `why` when it cannot be made.
  const AccuracyReference* get(size_t index, bool full, std::string& why) {
    if (!made_ || (full && !made_->full)) made_ = compute_reference(job_, files_, launch_, full);
    if (made_->failure) {
      why = "no reference on the timing's inputs: " + made_->failure->error;
      return nullptr;
    }
    return &made_->timing_sets.at(index);
  }
  const std::vector<uint64_t>& calls() const { return job_.call_sets; }
  // Whether `outputs`, failing against reference `index` (made full), pass at its ties
  // (judge_with_ties on the same inputs); `why` gets why not when they fail.
  bool pass_at_ties(const WorkerJob& rule, size_t index, const std::vector<Tensor>& outputs,
                    std::string& why) {
    if (!made_ || made_->failure || !made_->full) return false;
    TieInputs on{true, {}, job_.verify_secret};
    if (index > 0) on.call = {job_.call_sets.at(index - 1)};
    why = judge_with_ties(rule, made_->timing_sets.at(index), outputs, files_, launch_, on);
    return why.empty();
  }

 private:
  WorkerJob job_;
  const CheckFiles& files_;
  const CheckLaunch& launch_;
  std::optional<ReferenceOutcome> made_;
};

// Judges `outputs` by `rule` against `ref`; "" when they pass, else why not. `decided`: whether
// the verdict stands without the fp64 step (it passed, or the reference had fp64 or the rule an
// expected output).
std::string judge_against(const WorkerJob& rule, const AccuracyReference& ref,
                          const std::vector<Tensor>& outputs, bool& decided) {
  reports::ResultRecord verdict;
  judge_outputs(rule, ref, outputs, verdict);
  decided = verdict.status == Status::kPass || !ref.fp64.empty() || !rule.expected.empty();
  return verdict.status == Status::kPass ? "" : verdict.error;
}

// Judges `outputs` against reference `index` of `timing`, made full when the verdict needs it.
std::string judge_with_timing(const WorkerJob& rule, TimingReference& timing, size_t index,
                              const std::vector<Tensor>& outputs, bool& no_ref) {
  std::string why;
  for (bool full : {false, true}) {
    const AccuracyReference* ref = timing.get(index, full, why);
    if (!ref) {
      no_ref = true;
      return why;
    }
    bool decided = false;
    why = judge_against(rule, *ref, outputs, decided);
    if (decided) break;
  }
  if (!why.empty() && timing.pass_at_ties(rule, index, outputs, why)) return "";
  return why;
}

std::string describe_call(uint64_t id) {
  return fmt::format("call {} of timed sample {}", id % kCallIdStride + 1, id / kCallIdStride + 1);
}

// The calls the parent read of one worker: those the reference backend's worker was read at too
// are judged against its outputs (allclose); the rest, and those not allclose (the fp64 step
// decides), go to a reference worker: all that failed, and at random as many others as eager's
// calls fit in 5% of the worker's timed time (at least kMinWorkerCalls).
constexpr size_t kMinWorkerCalls = 4;
constexpr double kWorkerShare = 0.05;
struct CallsPlan {
  std::vector<uint64_t> to_worker;
  size_t against_timed = 0, unverified = 0;
};
CallsPlan plan_calls(const WorkerJob& rule, const TimedCalls& calls) {
  CallsPlan p;
  std::vector<uint64_t> others;
  for (const auto& [id, outputs] : *calls.read) {
    if (calls.reference && calls.reference->count(id)) {
      bool decided = false;
      AccuracyReference timed;
      timed.eager = calls.reference->at(id);
      const std::string why = judge_against(rule, timed, outputs, decided);
      if (why.empty()) {
        ++p.against_timed;
        continue;
      }
      p.to_worker.push_back(id);
      continue;
    }
    others.push_back(id);
  }
  const double per_call = std::max(calls.reference_ms_per_call, 1e-6);
  const size_t budget =
      std::max(kMinWorkerCalls, static_cast<size_t>(kWorkerShare * calls.timed_ms / per_call));
  std::mt19937_64 rng(os_secret());
  std::shuffle(others.begin(), others.end(), rng);
  const size_t take = std::min(others.size(), budget);
  p.to_worker.insert(p.to_worker.end(), others.begin(), others.begin() + static_cast<long>(take));
  p.unverified = others.size() - take;
  return p;
}

// "" when every call sent to the reference worker passes, else the first failure.
std::string judge_worker_calls(const WorkerJob& rule, const TimedCalls& calls,
                               TimingReference& timing) {
  for (size_t i = 0; i < timing.calls().size(); ++i) {
    const uint64_t id = timing.calls()[i];
    bool no_ref = false;
    std::string why = judge_with_timing(rule, timing, 1 + i, calls.read->at(id), no_ref);
    if (why.empty()) continue;
    if (no_ref) return why;
    return fmt::format(
        "its outputs in {} (every call on inputs of its own) fail against the reference made "
        "outside its worker: {}",
        describe_call(id), why);
  }
  return "";
}

// The hand-off of backend `k` (its outputs on sets A and B in its worker): A against
// `reference` (made full when the verdict needs it), B against the timing's. "" or why not.
std::string judge_handed(const WorkerJob& job, ReferenceOutcome& reference, const CheckFiles& files,
                         const CheckLaunch& launch, TimingReference& timing,
                         const std::vector<HandedOut>& handed, size_t k, const std::string& backend,
                         const std::string& index_why) {
  bool set_a = false;
  for (const HandedOut& h : handed) {
    if (h.backend != k) continue;
    set_a = set_a || h.set == 0;
    std::string unreadable;
    const std::optional<TensorGroups> outputs = take_tensors(h.file, unreadable);
    if (!outputs || outputs->size() != 1) {
      return fmt::format("its timing worker's hand-off {} does not read: {}",
                         h.file.filename().string(), unreadable);
    }
    WorkerJob rule = job;
    // The case's expected outputs are for set A, and eager is held to eager's own outputs.
    if (backend == "eager") rule.expected.clear();
    bool no_ref = false;
    std::string why;
    if (h.set == 1) {
      rule.expected.clear();
      why = judge_with_timing(rule, timing, 0, (*outputs)[0], no_ref);
    } else {
      bool decided = false;
      why = judge_against(rule, reference.ref, (*outputs)[0], decided);
      if (!decided && !reference.full) {
        reference = compute_reference(job, files, launch);
        if (reference.failure) return "no reference to hold it to: " + reference.failure->error;
        why = judge_against(rule, reference.ref, (*outputs)[0], decided);
      }
      if (!why.empty() && backend != "eager") {
        // As the accuracy check: a tie gone the other way is not a failure (judge_at_ties).
        why = judge_with_ties(rule, reference.ref, (*outputs)[0], files, launch);
      }
    }
    if (why.empty()) continue;
    if (no_ref) return why;
    return fmt::format("its outputs on input set {} in its timing worker {}: {}",
                       h.set == 0 ? "A" : "B",
                       backend == "eager" ? "are off eager's made outside it (a plugin wrote into "
                                            "them?)"
                                          : "fail against the reference made outside it",
                       why);
  }
  if (set_a) return "";
  return "its timing worker handed out none of its checked outputs: " +
         (index_why.empty() ? std::string("no file on input set A") : index_why);
}

}  // namespace

void judge_timing_hand_off(const WorkerJob& job, ReferenceOutcome& reference,
                           const CheckFiles& reference_files, const CheckLaunch& launch,
                           const TimedCalls& calls, std::vector<reports::ResultRecord>& results) {
  if (job.timing.no_audit) return;  // nothing handed out: every result says it is unaudited
  std::vector<HandedOut> handed;
  const std::string why = index_hand_off(job.tensors, job.backends.size(), handed);
  WorkerJob rule = job;
  rule.expected.clear();  // a case's expected outputs are for set A
  const CallsPlan plan = calls.read ? plan_calls(rule, calls) : CallsPlan{};
  TimingReference timing(job, reference_files, launch, plan.to_worker, calls.secret);
  for (reports::ResultRecord& r : results) {
    if (r.status != Status::kPass) continue;
    const auto at = std::find(job.backends.begin(), job.backends.end(), r.backend);
    if (at == job.backends.end()) continue;  // finalize_job gives one result per job backend
    const auto k = static_cast<size_t>(at - job.backends.begin());
    std::string failure = reference.failure
                              ? "no reference to hold its outputs to: " + reference.failure->error
                              : judge_handed(job, reference, reference_files, launch, timing,
                                             handed, k, r.backend, why);
    if (failure.empty() && calls.read) failure = judge_worker_calls(rule, calls, timing);
    if (calls.read && calls.calls_timed > 0) {
      const size_t verified = plan.against_timed + plan.to_worker.size();
      r.audit_coverage = static_cast<double>(verified) / static_cast<double>(calls.calls_timed);
      r.audit += fmt::format(
          "; the harness read {} of its {} timed calls' outputs out of its stopped worker (up to "
          "{} elements each), {} judged against the reference backend's on the same inputs and "
          "{} against eager run outside ({} read but not judged): a memo serving 10% of calls "
          "escapes with probability {:.2g}",
          calls.read->size(), calls.calls_timed, kSampledElements, plan.against_timed,
          plan.to_worker.size(), plan.unverified, std::pow(0.9, static_cast<double>(verified)));
    }
    if (failure.empty()) continue;
    r.status = Status::kFailAccuracyInPerf;
    r.error = failure;
  }
  remove_hand_off(job.tensors);
}

}  // namespace crucible
