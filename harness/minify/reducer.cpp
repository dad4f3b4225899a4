// The reduction loop and its state (see reducer.h).
#include "reducer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <optional>

#include "crucible/core/error.h"
#include "passes/pass.h"

namespace crucible::minify {

ReduceState::ReduceState(const Graph& g, const Recording& rec, Oracle& oracle, Signature locked,
                         std::vector<int> keep, int jobs)
    : g_(g),
      rec_(rec),
      oracle_(oracle),
      locked_(std::move(locked)),
      keep_(std::move(keep)),
      start_nodes_(static_cast<int>(keep_.size())),
      jobs_(std::max(1, jobs)) {}

std::optional<Candidate> ReduceState::cut_or_none(const std::vector<int>& keep,
                                                  const ParamOverrides& params) const {
  try {
    return cut(g_, rec_, keep, params);
  } catch (const Error&) {
    return std::nullopt;  // a cut the IR rejects is no candidate
  }
}

int ReduceState::try_first(const std::vector<std::vector<int>>& options) {
  for (size_t b = 0; b < options.size(); b += static_cast<size_t>(jobs_)) {
    const size_t e = std::min(options.size(), b + static_cast<size_t>(jobs_));
    std::vector<std::optional<Candidate>> cands(e - b);
    for (size_t i = b; i < e; ++i) {
      const bool smaller = !options[i].empty() && options[i].size() < keep_.size();
      if (smaller) cands[i - b] = cut_or_none(options[i], params_);
    }
    auto verdict = [this](const std::optional<Candidate>& c) {
      return c.has_value() && fails_like_original(*c);
    };
    std::vector<bool> ok;
    if (cands.size() == 1) {
      ok.push_back(verdict(cands[0]));
    } else {  // up to --jobs workers at once; the first in order that fails wins
      std::vector<std::future<bool>> verdicts;
      for (const auto& c : cands) {
        verdicts.push_back(std::async(std::launch::async, verdict, std::cref(c)));
      }
      for (auto& v : verdicts) ok.push_back(v.get());
    }
    for (size_t i = b; i < e; ++i) {
      if (!ok[i - b]) continue;
      keep_ = options[i];
      if (on_progress) on_progress(progress());
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool ReduceState::fails_like_original(const Candidate& c) {
  if (!same_failure(locked_, oracle_.test(c).signature)) return false;
  if (confirm_each_ && !same_failure(locked_, oracle_.run(c).signature)) {
    ++flipped_;
    return false;
  }
  return true;
}

bool ReduceState::confirm() {
  if (same_failure(locked_, oracle_.run(candidate()).signature)) return true;
  ++flipped_;
  return false;
}

void ReduceState::restore(Snapshot s) {
  keep_ = std::move(s.keep);
  params_ = std::move(s.params);
  final_ = std::move(s.final);
}

bool ReduceState::try_keep(std::vector<int> keep) { return try_first({std::move(keep)}) == 0; }

bool ReduceState::try_candidate(Candidate c) {
  if (!fails_like_original(c)) return false;
  final_ = std::move(c);
  if (on_progress) on_progress(progress() + ", shapes shrunk");
  return true;
}

bool ReduceState::try_params(ParamOverrides params) {
  const std::optional<Candidate> c = cut_or_none(keep_, params);
  if (!c || !fails_like_original(*c)) return false;
  params_ = std::move(params);
  if (on_progress)
    on_progress(progress() + fmt::format(", {} parameters simplified", params_.size()));
  return true;
}

std::string ReduceState::progress() const {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // A rough ETA: the calls a bisection of what is left takes (two per halving), the culprit
  // and data passes (about one per node) and the 5 replays, at the mean cost of a call so far.
  // Later calls are on smaller graphs and cheaper, so it errs long.
  const int calls = oracle_.calls();
  const double n = static_cast<double>(keep_.size());
  const double left = 2 * std::ceil(std::log2(n + 1)) + n + 5;
  const std::string eta = calls > 0 ? fmt::format(", ETA ~{:.0f} s", s / calls * left) : "";
  return fmt::format("nodes {}/{}, oracle calls {}, cache hits {}, flipped {}, {:.1f} s{}",
                     keep_.size(), start_nodes_, calls, oracle_.cache_hits(), flipped_.load(), s,
                     eta);
}

bool run_confirmed(ReduceState& state, const std::function<bool(ReduceState&)>& step) {
  ReduceState::Snapshot before = state.snapshot();
  if (!step(state)) return false;
  if (state.confirm_each() || state.confirm()) return true;
  state.restore(std::move(before));
  state.set_confirm_each();
  return step(state);
}

bool run_pass(ReduceState& state, const ReductionPass& pass) {
  return run_confirmed(state, [&](ReduceState& s) { return pass.run(s); });
}

void simplify_data(ReduceState& state) {
  for (const auto& pass : data_passes()) run_pass(state, *pass);
}

void reduce_to_fixpoint(ReduceState& state) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& pass : reduction_passes()) changed = run_pass(state, *pass) || changed;
  }
}

}  // namespace crucible::minify
