// The parent's side of timing: one timing worker per backend, eager's included, so no backend
// shares a process with another; the parent interleaves their samples by turns, timestamps each
// sample with its own clock, and reads every worker's CPU from its cgroup, then judges what the
// workers reported against what it saw (docs/design_decisions.md, "Isolation").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/reports/records.h"
#include "turn_channel.h"
#include "worker_launch.h"

namespace crucible {

struct TurnWorker {
  WorkerJob job;  // a timing job of one backend; turns is set here
  WorkerFiles files;
  // The reference backend's worker: its outputs are read at every call another worker's are (of
  // the same id, so on the same inputs), to judge theirs by.
  bool reference = false;
  // Its own variables over take_turns' env: its backend's cache folder, shared with the profile
  // worker of the same model, so that what the backend chose there (compiled kernels, the peer's
  // timed linear paths) is what is timed.
  std::map<std::string, std::string> env;
};

// Timed calls whose outputs the parent read out of the worker, stopped after its sample: by call
// id (its inputs are call_input_set(B, job.secret, id), written by the parent into the worker's
// call_input_region.h: the worker is never given job.secret), the elements of each output at
// sampled_elements(TurnRecord::verify_secret, id, ...).
using CallsRead = std::map<uint64_t, std::vector<Tensor>>;

// One sample seen from outside: the parent's time from "go" to "done", what the worker said, and
// the CPU its whole process tree used meanwhile.
struct TurnWindow {
  double outside_ms = 0;
  TurnDone inside;
  double tree_cpu_ms = 0;
  // The time the worker's main thread and the parent's waited for a CPU meanwhile: a message
  // each way is late by that much, not by a clock that lies.
  double wait_ms = 0;
};

// One worker's timing, its report and what the parent saw of it.
struct TurnRecord {
  std::vector<reports::ResultRecord> results;  // as its report gave them (one)
  std::vector<TurnWindow> windows;
  // CPU its process tree used where it had nothing to compute: during the other workers' samples
  // (all of it: its main thread waits for "p"), and while the parent wrote its next sample's
  // inputs (it waits for "go"; the inputs exist only from there, so work done ahead of the clock
  // is done here).
  double idle_cpu_ms = 0;
  double inputs_cpu_ms = 0;
  // How the idle CPU fell: in how many of the others' samples it used any, and most in one (a
  // pool or a thread chain working through every sample, or one event).
  int idle_windows = 0;
  int idle_windows_used = 0;
  double idle_most_ms = 0;
  // CPU it used while the parent waited for it to settle after each turn, and (judge_turns) all of
  // that past each turn's allowance for a pool's spin.
  std::vector<double> settle_cpu_ms;
  double after_turn_cpu_ms = 0;
  // The CPU a pool of its thread count spins after a region here (pool_spin.h), measured where no
  // plugin runs: with the reference worker's, what a turn's settling may use unpaid.
  double pool_spin_ms = 0;
  bool reference = false;  // its worker's TurnWorker::reference
  // backend -> CPU that backend's worker used during this worker's samples.
  std::map<std::string, double> disturbed;
  std::string cpu_how;  // how its CPU was read (WorkerCpu::how)
  double cpu_resolution_ms = 0;
  std::string protocol_error;  // it broke the turn protocol: what it said
  CallsRead verified;
  // Its samples' time by the parent's clock, all together.
  double timed_ms() const {
    double ms = 0;
    for (const TurnWindow& w : windows) ms += w.outside_ms;
    return ms;
  }
  size_t verified_bytes = 0;
  uint64_t verify_secret = 0;  // of the sampled elements; never given to a timing worker
  int64_t calls_timed = 0;
  std::string read_error;  // its outputs did not read: why
  // A thread of it whose priority or CPUs changed after it was first seen (from the worker's start,
  // before the next worker started), and how ("" if none).
  std::string placement_change;
  // A process of its cgroup that left its worker's tree (WorkerCpu::stray), first seen ("" none).
  std::string stray;
  // The first process other than the parent that continued it after a stop (SIGCONT) while it was
  // timed, as its worker said (TurnDone::continued_by: -1 for one whose pid is not vouched for),
  // and the backend whose worker's process tree that process was in ("" for none).
  int64_t continued_by = 0;
  std::string continued_by_backend;
};

// Starts the workers one after another (each loads, compiles, checks and warms up while the others
// wait; all are given one secret of the calls' inputs, set in their jobs, or a new one when none
// is), then gives each a sample in turn, in the order given, for as long as any wants more, and
// ends them one after another (each measures the machine again alone). Each runs under `limits`.
std::vector<TurnRecord> take_turns(std::vector<TurnWorker>& workers,
                                   const std::map<std::string, std::string>& env,
                                   const ChildLimits& limits);

// What the parent saw, held against what each worker reported; a passing result fails the audit
// when its clock and the parent's disagree, when it claims more CPU than the machine has, or when
// its processes worked outside its samples; one whose samples another worker's CPU disturbed says
// by whom.
void judge_turns(std::vector<TurnRecord>& records);

}  // namespace crucible
