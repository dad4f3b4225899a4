// Summary statistics over timing samples.
#include <algorithm>
#include <cmath>
#include <limits>

#include "crucible/reports/records.h"

namespace crucible::reports {

double median(std::vector<double> values) {
  const size_t n = values.size();
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

SampleStats summarize(const std::vector<double>& samples) {
  SampleStats s;
  s.n = static_cast<int64_t>(samples.size());
  if (samples.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.median = s.mean = s.stdev = s.min = s.max = s.p10 = s.p90 = s.cv = nan;
    return s;
  }
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = median(sorted);
  s.min = sorted.front();
  s.max = sorted.back();
  double sum = 0;
  for (double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (double v : sorted) sq += (v - s.mean) * (v - s.mean);
  s.stdev = n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0.0;
  s.cv = s.mean != 0 ? s.stdev / s.mean : 0.0;
  // Nearest rank: the smallest sample with at least p of the samples at or below it.
  auto rank = [&](double p) {
    const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
    return sorted[std::clamp<size_t>(k, 1, n) - 1];
  };
  s.p10 = rank(0.10);
  s.p90 = rank(0.90);
  return s;
}

}  // namespace crucible::reports
