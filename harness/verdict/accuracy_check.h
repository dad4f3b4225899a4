// Accuracy as two workers and a verdict in the parent: the reference (eager twice, fp64) in a
// worker that loads no plugin, the backend's outputs in a worker that computes no reference, and
// the comparison here, where no plugin was ever loaded (docs/design_decisions.md, "Isolation").
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "accuracy_verdict.h"
#include "subprocess.h"
#include "worker_launch.h"

namespace crucible {

// Where one worker of the check leaves its report, log and tensors.
struct CheckFiles {
  WorkerFiles worker;
  std::filesystem::path tensors;  // removed once read
};

// How the check's workers run: extra environment and limits, the same for both.
struct CheckLaunch {
  std::map<std::string, std::string> env;
  ChildLimits limits;
};

struct ReferenceOutcome {
  AccuracyReference ref;
  // With job.timing_sets: the references on the timing audit's other input sets, [0] set B,
  // [1 + i] the sampled elements of call job.call_sets[i] (eager once, fp64 when `full`; never a
  // test case's expected outputs, which are for set A).
  std::vector<AccuracyReference> timing_sets;
  bool full = true;  // eager's determinism checked and fp64 made (when the rule wants it)
  // Set when there is no reference to judge against (eager failed, crashed, differed between its
  // two runs, or a test case's expected outputs did not read): every backend's result.
  std::optional<reports::ResultRecord> failure;
};

// The reference for the model and seed of `job` (its kind and backends are set here). A test
// case's expected outputs (job.expected) are read in this process. Not `full`: eager once and no
// fp64, which is all a backend close to eager needs (fp64 costs more than eager, eager's second
// run as much again); a verdict that needs more computes the full one.
ReferenceOutcome compute_reference(const WorkerJob& job, const CheckFiles& files,
                                   const CheckLaunch& launch, bool full = true);

// The accuracy result of job.backends[0] against `reference`.
reports::ResultRecord check_accuracy(const WorkerJob& job, const ReferenceOutcome& reference,
                                     const CheckFiles& files, const CheckLaunch& launch);

// What the parent read of a timing worker's timed calls (turn_driver.h): by call id, the sampled
// elements of each output (output_sample.h).
using CallsRead = std::map<uint64_t, std::vector<Tensor>>;
struct TimedCalls {
  const CallsRead* read = nullptr;
  // The reference backend's worker's reads, on the same ids (nullptr: none, or this is it).
  const CallsRead* reference = nullptr;
  uint64_t secret = 0;  // of the sampled elements
  int64_t calls_timed = 0;
  double timed_ms = 0;               // its samples, by the parent's clock
  double reference_ms_per_call = 0;  // eager's, to bound the reference worker's work
};

// A timing worker's outputs judged against references made where no plugin was loaded: its
// hand-off (job.tensors, see timing_job.cpp: its outputs on input sets A and B), set A's against
// `reference`, and the calls the parent read (`calls`): against the reference backend's outputs
// on the same call where it was read, else (a random subset, within 5% of the timed time)
// against eager run here on that call's inputs by a reference worker (its files
// `reference_files`), which also makes B's. A passing result whose outputs fail becomes
// fail_accuracy_in_perf; its audit line and coverage say how many calls were verified. A
// reference that is not full is made full when a verdict needs the rule's fp64 step. Unaudited
// timing (--no-audit) hands out nothing.
void judge_timing_hand_off(const WorkerJob& job, ReferenceOutcome& reference,
                           const CheckFiles& reference_files, const CheckLaunch& launch,
                           const TimedCalls& calls, std::vector<reports::ResultRecord>& results);

}  // namespace crucible
