// The remembered-results verdict (see fresh_verdict.h): thresholds measured on this machine.
#include "fresh_verdict.h"

#include <algorithm>

#include "crucible/reports/detect.h"
#include "crucible/reports/records.h"

namespace crucible {

namespace {

// Honest code is slower on fresh inputs too, by branch predictors that learned the repeated
// inputs: up to 1.5x on graphs of about 1 us (codegen's sin_cos, 1.40-1.51x) and 1.2x on 3 us
// ones here. So either 1.5x and 5 us, or, for graphs of microseconds, 3x and 1 us: a
// contents-keyed memo of a 3 us graph measured 6.8x and 3.4 us, which the 5 us gap alone let
// through.
constexpr double kRatio = 1.5;
constexpr double kGapMs = 0.005;
constexpr double kTinyRatio = 3.0;
constexpr double kTinyGapMs = 0.001;

bool far_apart(double slow, double fast) {
  return (slow > kRatio * fast && slow - fast > kGapMs) ||
         (slow > kTinyRatio * fast && slow - fast > kTinyGapMs);
}

}  // namespace

bool FreshVerdict::suspect() const { return n_fresh >= 2 && far_apart(fresh, samples); }

bool FreshVerdict::confirmed() const {
  if (!suspect()) return false;
  if (n_plain == 0) return true;
  return far_apart(fresh_median, plain_median) && p_value < kMaxPValue;
}

FreshVerdict judge_fresh_calls(const std::vector<double>& fresh, const std::vector<double>& samples,
                               const std::vector<double>& plain) {
  FreshVerdict v;
  v.n_fresh = fresh.size();
  v.n_plain = plain.size();
  if (fresh.empty() || samples.empty()) return v;
  v.fresh = *std::min_element(fresh.begin(), fresh.end());
  v.samples = reports::summarize(samples).p10;
  v.fresh_median = reports::summarize(fresh).median;
  if (!plain.empty()) {
    v.plain_median = reports::summarize(plain).median;
    v.p_value = reports::mann_whitney_p(fresh, plain);
  }
  return v;
}

}  // namespace crucible
