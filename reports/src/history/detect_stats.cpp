// The detector's statistics: levels and run-to-run noise of a series, the Mann-Whitney rank test
// and the bootstrap intervals `compare` gives, each independent of how the detector walks runs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "crucible/reports/records.h"
#include "detect_internal.h"

namespace crucible::reports {

namespace detail {

double log_median(const SeriesPoint& p) { return std::log(median(p.samples)); }

double rel(double log_change) { return std::exp(log_change) - 1; }

double window_level(const std::vector<SeriesPoint>& s, const std::vector<size_t>& runs,
                    int window) {
  const size_t n = std::min<size_t>(runs.size(), static_cast<size_t>(std::max(window, 0)));
  std::vector<double> logs;
  logs.reserve(n);
  for (size_t k = runs.size() - n; k < runs.size(); ++k) logs.push_back(log_median(s[runs[k]]));
  return median(logs);
}

std::vector<double> pooled(const std::vector<SeriesPoint>& s, const std::vector<size_t>& idx) {
  std::vector<double> out;
  for (size_t i : idx) out.insert(out.end(), s[i].samples.begin(), s[i].samples.end());
  return out;
}

double floor_at(const DetectorOptions& o, double level) {
  const double rel_floor = std::log1p(o.floor);
  return o.floor_abs > 0 ? std::max(rel_floor, std::log1p(o.floor_abs / std::exp(level)))
                         : rel_floor;
}

// Differences of consecutive runs that show a series' run-to-run spread without help.
constexpr size_t kDiffsThatShowTheSpread = 6;

// 1.4826 x the median |difference| of consecutive log medians / sqrt(2): a standard deviation for
// normal noise that neither a disturbed run nor an earlier level shift inflates; never below a
// calibrated prior, nor, on a short history, below what the runs' own sample spread makes a
// median wobble by.
double noise_of(const std::vector<SeriesPoint>& s, const std::vector<size_t>& hist, double prior) {
  std::vector<double> diff, sampling;
  for (size_t k = 1; k < hist.size(); ++k) {
    diff.push_back(std::abs(log_median(s[hist[k]]) - log_median(s[hist[k - 1]])));
  }
  for (size_t i : hist) {
    const auto& x = s[i].samples;
    if (x.size() < 2) continue;
    // Robust too: one preempted sample must not make the run look noisy.
    std::vector<double> lx, ld;
    for (double v : x) lx.push_back(std::log(v));
    const double lm = median(lx);
    for (double l : lx) ld.push_back(std::abs(l - lm));
    // The median of n samples wobbles by about 1.25 sigma / sqrt(n).
    sampling.push_back(1.2533 * 1.4826 * median(ld) / std::sqrt(static_cast<double>(x.size())));
  }
  // A short history's estimate is itself noisy and biased low: widen it by (1 + 2/n).
  const double n = static_cast<double>(diff.size());
  const double run_to_run =
      diff.empty() ? 0.0 : 1.4826 * median(diff) / std::sqrt(2.0) * (1 + 2.0 / n);
  // Six or more differences show the medians' spread itself, their sampling wobble included: the
  // sampling error is a floor only before that. (A series of widely spread samples whose medians
  // hold to 0.3% run to run must not be judged as if they moved by the samples' spread.)
  const double sampling_floor =
      diff.size() >= kDiffsThatShowTheSpread || sampling.empty() ? 0.0 : median(sampling);
  return std::max({run_to_run, sampling_floor, prior});
}

}  // namespace detail

double series_noise(const std::vector<SeriesPoint>& series, double prior) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i].samples.empty() && !series[i].noisy) timed.push_back(i);
  }
  return timed.empty() ? prior : detail::rel(detail::noise_of(series, timed, prior));
}

namespace {

// A 95% percentile-bootstrap interval of stat() over resamples of `sets` (1,000, fixed seed).
std::pair<double, double> bootstrap_interval(
    const std::vector<const std::vector<double>*>& sets,
    const std::function<double(const std::vector<std::vector<double>>&)>& stat) {
  const double nan = std::nan("");
  for (const auto* s : sets) {
    if (s->empty()) return {nan, nan};
  }
  std::mt19937_64 rng(0x5eed);
  std::vector<std::vector<double>> resampled;
  resampled.reserve(sets.size());
  for (const auto* s : sets) resampled.emplace_back(s->size());
  std::vector<double> stats;
  for (int i = 0; i < 1000; ++i) {
    for (size_t k = 0; k < sets.size(); ++k) {
      std::uniform_int_distribution<size_t> pick(0, sets[k]->size() - 1);
      for (double& v : resampled[k]) v = (*sets[k])[pick(rng)];
    }
    stats.push_back(stat(resampled));
  }
  std::sort(stats.begin(), stats.end());
  return {stats[25], stats[974]};
}

}  // namespace

std::pair<double, double> median_change_interval(const std::vector<double>& a,
                                                 const std::vector<double>& b) {
  return bootstrap_interval({&a, &b}, [](const std::vector<std::vector<double>>& r) {
    return median(r[1]) / median(r[0]) - 1;
  });
}

std::pair<double, double> speedup_change_interval(const std::vector<double>& eager_a,
                                                  const std::vector<double>& backend_a,
                                                  const std::vector<double>& eager_b,
                                                  const std::vector<double>& backend_b) {
  return bootstrap_interval(
      {&eager_a, &backend_a, &eager_b, &backend_b}, [](const std::vector<std::vector<double>>& r) {
        return (median(r[2]) / median(r[3])) / (median(r[0]) / median(r[1])) - 1;
      });
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1;
  std::vector<std::pair<double, int>> all;
  all.reserve(n);
  for (double v : a) all.push_back({v, 0});
  for (double v : b) all.push_back({v, 1});
  std::sort(all.begin(), all.end());
  double r1 = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;  // at least one: a NaN equals nothing, itself included
    while (j < n && all[j].first == all[i].first) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of ranks i+1..j
    for (size_t k = i; k < j; ++k) r1 += all[k].second == 0 ? rank : 0;
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    i = j;
  }
  const double d1 = static_cast<double>(n1), d2 = static_cast<double>(n2),
               dn = static_cast<double>(n);
  const double u = r1 - d1 * (d1 + 1) / 2, mean = d1 * d2 / 2;
  const double var = d1 * d2 / 12 * ((dn + 1) - ties / (dn * (dn - 1)));
  if (var <= 0) return 1;
  const double z = std::max(0.0, std::abs(u - mean) - 0.5) / std::sqrt(var);
  return std::erfc(z / std::sqrt(2.0));
}

}  // namespace crucible::reports
