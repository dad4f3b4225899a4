// Are a backend's results remembered, not computed? Its timed calls on inputs never seen against
// its other samples: a screen during timing, and a verdict once more rounds confirmed it.
#pragma once

#include <cstddef>
#include <vector>

namespace crucible {

struct FreshVerdict {
  size_t n_fresh = 0, n_plain = 0;
  double fresh = 0, samples = 0;              // ms per call: the screen's figures
  double fresh_median = 0, plain_median = 0;  // ms per call: the verdict's
  double p_value = 1;                         // rank test, fresh calls against plain samples

  // The fastest fresh call is far slower than the fastest tenth of the samples (a bimodal
  // distribution: remembered, and computed). A machine that slowed a few calls does this too.
  bool suspect() const;
  // Suspect, and the fresh calls are slower than the samples of rounds without one as a whole:
  // their medians far apart and their ranks separated (p < kMaxPValue), which calls slowed at
  // random do not give. Without plain samples the screen decides alone.
  bool confirmed() const;

  static constexpr double kMaxPValue = 0.002;  // two-sided: 0.001 in the direction judged
  // Rounds timing adds to a suspect, about half of them with a fresh call: the verdict's medians
  // then stand on some 8 fresh calls and as many more plain samples.
  static constexpr int kConfirmRounds = 16;
};

// `fresh`: each call on fresh inputs, timed alone; `samples`: every sample (ms per call);
// `plain`: the samples of rounds without a fresh call.
FreshVerdict judge_fresh_calls(const std::vector<double>& fresh, const std::vector<double>& samples,
                               const std::vector<double>& plain);

}  // namespace crucible
