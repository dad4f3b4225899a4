// Choosing between two implementations of one operation by timing them at compile time: the
// alternating runs, and the rule that keeps the challenger only when it clearly wins.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace crucible::vision {

// The timed runs of one race, in seconds, one entry per round for each side.
struct RaceTimes {
  std::vector<double> incumbent, challenger;
};

// A loaded machine (ctest -j2, another job on the cores) inflates a run by a time slice, which on a
// layer of tens of microseconds is many times its cost: with 3 rounds each a 2.5x slower Winograd
// once won. So a race goes on past min_rounds while within budget_s, up to max_rounds: a short
// problem gets dozens of rounds, so some run of each side is undisturbed, and the fastest run is
// the estimate. A long one (ResNet-18's 64-channel 3x3 at batch 16 takes tens of ms a run) keeps
// min_rounds, where a time slice is a small part of a run and more rounds cost compile time.
struct RacePolicy {
  int min_rounds = 3;
  int max_rounds = 64;
  double budget_s = 0.01;
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

// A process's race outcomes by key (what the outcome depends on, e.g. the problem's shape): the
// first decide() of a key runs its race, later ones return that outcome without racing, so equal
// problems choose alike and pay for one race. Thread-safe; concurrent first calls of one key may
// both race, and the first outcome stored is the one every caller gets.
class RaceOutcomes {
 public:
  bool decide(const std::string& key, const std::function<bool()>& race) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = outcomes_.find(key);
      if (it != outcomes_.end()) return it->second;
    }
    const bool won = race();  // unlocked: other problems race meanwhile
    std::lock_guard<std::mutex> lock(mutex_);
    return outcomes_.emplace(key, won).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, bool> outcomes_;
};

}  // namespace crucible::vision
