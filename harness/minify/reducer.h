// The reduction loop: a linear pipeline of delta passes (passes/), each shrinking the set of the
// original graph's nodes that the candidate keeps while it still fails with the locked
// signature, repeated until a whole round removes nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "candidate.h"
#include "oracle.h"
#include "signature.h"

namespace crucible::minify {

class ReductionPass;

class ReduceState {
 public:
  // `jobs`: candidates try_first() tests at once.
  ReduceState(const Graph& g, const Recording& rec, Oracle& oracle, Signature locked,
              std::vector<int> keep, int jobs = 1);

  const Graph& graph() const { return g_; }
  const std::vector<int>& keep() const { return keep_; }
  Candidate candidate() const { return final_ ? *final_ : cut(g_, rec_, keep_, params_); }
  const ParamOverrides& param_overrides() const { return params_; }

  // Whether the candidate keeping `keep` fails like the original; when it does, it becomes the
  // state. An empty or malformed cut is simply not a failure. Each acceptance is rerun uncached
  // only once confirm_each() is on; before that, run_pass() confirms a pass's end result.
  bool try_keep(std::vector<int> keep);
  // The first of `options` (in order) that try_keep would accept becomes the state; up to `jobs`
  // options are tested at once, so later ones may cost oracle calls that are not used. Returns
  // its index, or -1.
  int try_first(const std::vector<std::vector<int>>& options);
  // The same for the kept nodes with parameter recipes replaced by `params`.
  bool try_params(ParamOverrides params);
  // Data passes after the structure is minimal: `c` (the candidate reshaped) replaces the cut
  // when it fails like the original. From then on the state is that candidate.
  bool try_candidate(Candidate c);

  // Reruns the current candidate, uncached: whether it still fails like the original. A verdict
  // that flips is counted.
  bool confirm();
  bool confirm_each() const { return confirm_each_; }
  void set_confirm_each() { confirm_each_ = true; }
  struct Snapshot {
    std::vector<int> keep;
    ParamOverrides params;
    std::optional<Candidate> final;
  };
  Snapshot snapshot() const { return {keep_, params_, final_}; }
  void restore(Snapshot s);

  int flipped() const { return flipped_; }
  int start_nodes() const { return start_nodes_; }
  const Oracle& oracle() const { return oracle_; }
  // One line of progress: nodes now / at start, oracle calls, cache hits, flipped verdicts,
  // elapsed, and a rough ETA.
  std::string progress() const;
  std::function<void(const std::string&)> on_progress;

 private:
  std::optional<Candidate> cut_or_none(const std::vector<int>& keep,
                                       const ParamOverrides& params) const;
  // Whether candidate `c` fails like the original (under confirm_each, twice: the second run
  // uncached, a flip counted).
  bool fails_like_original(const Candidate& c);

  const Graph& g_;
  const Recording& rec_;
  Oracle& oracle_;
  Signature locked_;
  std::vector<int> keep_;
  ParamOverrides params_;
  std::optional<Candidate> final_;
  int start_nodes_ = 0;
  int jobs_ = 1;
  std::atomic<int> flipped_{0};
  bool confirm_each_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Runs `step` (a pass, or any cut); when it changed the state, reruns the result once. A result
// that does not hold (a flaky verdict steered it) is undone and the step redone with every
// acceptance confirmed, as are all later ones: one rerun per step instead of one per accepted
// candidate on a deterministic backend, and no flaky verdict kept on another.
bool run_confirmed(ReduceState& state, const std::function<bool(ReduceState&)>& step);
bool run_pass(ReduceState& state, const ReductionPass& pass);
// Runs every registered pass in order, round after round, until a round removes no node.
void reduce_to_fixpoint(ReduceState& state);
// Once the nodes are minimal: the data passes (constant zeroing), which remove no node.
void simplify_data(ReduceState& state);

}  // namespace crucible::minify
