// Choosing between two implementations of one operation by timing them at compile time: the
// alternating runs, and the rule that keeps the challenger only when it clearly wins.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <vector>

namespace crucible::vision {

// The timed runs of one race, in seconds, one entry per round for each side.
struct RaceTimes {
  std::vector<double> incumbent, challenger;
};

// A loaded machine (ctest -j2, another job on the cores) inflates single runs by a time slice,
// which on a layer of tens of microseconds is many times its cost: with 3 rounds each a 2.5x
// slower Winograd once won. So a race runs at least kMinRounds rounds and goes on, while within
// kBudgetS, up to kMaxRounds; some round of each side then runs undisturbed, and the fastest run
// is the estimate.
struct RacePolicy {
  int min_rounds = 8;
  int max_rounds = 64;
  double budget_s = 0.02;
};

// Runs one untimed warm-up of each, then alternating timed rounds under `policy`.
template <typename Incumbent, typename Challenger>
RaceTimes race(Incumbent&& incumbent, Challenger&& challenger, const RacePolicy& policy = {}) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  incumbent();
  challenger();
  RaceTimes t;
  const auto start = Clock::now();
  for (int round = 0; round < policy.max_rounds; ++round) {
    if (round >= policy.min_rounds && seconds(start) > policy.budget_s) break;
    auto t0 = Clock::now();
    incumbent();
    t.incumbent.push_back(seconds(t0));
    t0 = Clock::now();
    challenger();
    t.challenger.push_back(seconds(t0));
  }
  return t;
}

// Whether the challenger replaces the incumbent: its fastest run must take at most `margin` of the
// incumbent's. The margin is what the challenger's cost elsewhere (Winograd's extra rounding) must
// buy, and it keeps a near tie, which noise decides either way, on the incumbent. Empty or
// non-finite times keep the incumbent.
inline bool challenger_wins(std::span<const double> incumbent, std::span<const double> challenger,
                            double margin) {
  if (incumbent.empty() || challenger.empty()) return false;
  const double a = *std::min_element(incumbent.begin(), incumbent.end());
  const double b = *std::min_element(challenger.begin(), challenger.end());
  return std::isfinite(a) && std::isfinite(b) && b <= margin * a;
}

}  // namespace crucible::vision
