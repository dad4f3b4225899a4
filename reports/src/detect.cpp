// The change detector (see detect.h). Levels are medians of log run-medians, noise is the robust
// spread of those over the baseline, and a change must hold on each of 2 or 3 consecutive runs,
// on one side, past a bar of k x noise / sqrt(runs): one disturbed run can make a `suspicious`
// note but never a regression.
#include "crucible/reports/detect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>

namespace crucible::reports {

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double log_median(const SeriesPoint& p) { return std::log(median_of(p.samples)); }

// Run-to-run noise in log units from `hist` (the environment's baseline runs, in order):
// 1.4826 x the median |difference| of consecutive log medians / sqrt(2), a standard deviation for
// normal noise that neither a disturbed run nor an earlier level shift inflates; never below what
// the runs' own sample spread makes a median wobble by, nor below a calibrated prior.
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
    const double lm = median_of(lx);
    for (double l : lx) ld.push_back(std::abs(l - lm));
    // The median of n samples wobbles by about 1.25 sigma / sqrt(n).
    sampling.push_back(1.2533 * 1.4826 * median_of(ld) / std::sqrt(static_cast<double>(x.size())));
  }
  // A short history's estimate is itself noisy and biased low: widen it by (1 + 2/n).
  const double n = static_cast<double>(diff.size());
  const double run_to_run =
      diff.empty() ? 0.0 : 1.4826 * median_of(diff) / std::sqrt(2.0) * (1 + 2.0 / n);
  return std::max({run_to_run, sampling.empty() ? 0.0 : median_of(sampling), prior});
}

std::vector<double> pooled(const std::vector<SeriesPoint>& s, const std::vector<size_t>& idx) {
  std::vector<double> out;
  for (size_t i : idx) out.insert(out.end(), s[i].samples.begin(), s[i].samples.end());
  return out;
}

double rel(double log_change) { return std::exp(log_change) - 1; }

// Runs at one level before the next run is judged against it.
constexpr size_t kMinLevelRuns = 4;

// Fingerprints are "key=value;key=value": the keys whose values differ, with both values.
std::string fingerprint_change(const std::string& from, const std::string& to) {
  auto fields = [](const std::string& f) {
    std::map<std::string, std::string> m;
    size_t at = 0;
    while (at <= f.size()) {
      const size_t end = std::min(f.find(';', at), f.size());
      const std::string kv = f.substr(at, end - at);
      const size_t eq = kv.find('=');
      if (!kv.empty()) m[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      at = end + 1;
    }
    return m;
  };
  const auto a = fields(from), b = fields(to);
  std::string out;
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    const std::string was = it == a.end() ? "(none)" : it->second;
    if (was != v) out += fmt::format("{}{} {} -> {}", out.empty() ? "" : "; ", k, was, v);
  }
  for (const auto& [k, v] : a) {
    if (!b.contains(k)) out += fmt::format("{}{} {} -> (none)", out.empty() ? "" : "; ", k, v);
  }
  return out.empty() ? "the environment changed" : out;
}

}  // namespace

double series_noise(const std::vector<SeriesPoint>& series, double prior) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i].samples.empty() && !series[i].noisy) timed.push_back(i);
  }
  return timed.empty() ? prior : rel(noise_of(series, timed, prior));
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
    return median_of(r[1]) / median_of(r[0]) - 1;
  });
}

std::pair<double, double> speedup_change_interval(const std::vector<double>& eager_a,
                                                  const std::vector<double>& backend_a,
                                                  const std::vector<double>& eager_b,
                                                  const std::vector<double>& backend_b) {
  return bootstrap_interval(
      {&eager_a, &backend_a, &eager_b, &backend_b}, [](const std::vector<std::vector<double>>& r) {
        return (median_of(r[2]) / median_of(r[3])) / (median_of(r[0]) / median_of(r[1])) - 1;
      });
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1;
  std::vector<std::pair<double, int>> all;
  for (double v : a) all.push_back({v, 0});
  for (double v : b) all.push_back({v, 1});
  std::sort(all.begin(), all.end());
  double r1 = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
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

std::vector<Alert> detect_changes(const std::vector<SeriesPoint>& s, const DetectorOptions& o,
                                  std::vector<std::string>* not_judged) {
  if (not_judged != nullptr) not_judged->assign(s.size(), "");
  auto unjudged = [&](size_t i, std::string why) {
    if (not_judged != nullptr) (*not_judged)[i] = std::move(why);
  };
  std::vector<Alert> out;
  std::vector<size_t> base, recent;  // the baseline at the current level; newer runs, up to 4
  std::vector<size_t> segment;       // every baseline run of this environment, for the noise
  std::vector<bool> flagged(s.size(), false);  // one run off alone, not (yet) part of a change
  std::optional<size_t> last_timed;
  std::string last_status;
  const double floor = std::log1p(o.floor);
  std::vector<std::optional<Alert>> single(s.size());

  // A run leaving `recent` joins the baseline; if it was off alone, that is said now.
  auto absorb = [&](size_t i, const Alert* note) {
    base.push_back(i);
    segment.push_back(i);
    if (flagged[i] && note) out.push_back(*note);
  };

  for (size_t i = 0; i < s.size(); ++i) {
    const SeriesPoint& p = s[i];
    if (last_status == "pass" && p.status != "pass") {
      out.push_back(
          {"status", p.run_id, p.run_id, 1, 0, 0, 0, 1, fmt::format("pass -> {}", p.status)});
    }
    if (!p.status.empty()) last_status = p.status;
    if (p.samples.empty()) continue;
    if (p.noisy) {
      unjudged(i, "not judged (the harness flagged this run noisy)");
      continue;
    }
    if (last_timed && s[*last_timed].fingerprint != p.fingerprint) {
      for (size_t r : recent) absorb(r, single[r] ? &*single[r] : nullptr);
      out.push_back({"environment", p.run_id, p.run_id, 1, 0, 0, 0, 1,
                     "a new baseline starts: " +
                         fingerprint_change(s[*last_timed].fingerprint, p.fingerprint)});
      base.clear();
      segment.clear();
      recent.clear();
    }
    last_timed = i;
    // Judging needs the environment's noise (min_baseline runs of it) and a level: after a
    // change the window that made it is the new level at once, so a second step right after
    // the first is still seen.
    if (segment.size() < static_cast<size_t>(o.min_baseline) || base.size() < kMinLevelRuns) {
      unjudged(
          i, segment.size() < static_cast<size_t>(o.min_baseline)
                 ? fmt::format("not judged ({} of {} runs)", segment.size() + 1, o.min_baseline + 1)
                 : fmt::format("not judged (a new level: {} of {} runs)", base.size() + 1,
                               kMinLevelRuns + 1));
      base.push_back(i);
      segment.push_back(i);
      continue;
    }
    recent.push_back(i);
    const std::vector<size_t> w(base.end() - std::min<size_t>(base.size(), o.window), base.end());
    std::vector<double> logs;
    for (size_t b : w) logs.push_back(log_median(s[b]));
    const std::vector<size_t> hist(segment.end() - std::min<size_t>(segment.size(), 60),
                                   segment.end());
    const double level = median_of(logs), sigma = noise_of(s, hist, o.prior_noise);
    const std::vector<size_t> ref(w.end() - std::min<size_t>(w.size(), 3), w.end());
    const std::vector<double> ref_samples = pooled(s, ref);
    const double thr1 = std::max(floor, o.k * sigma);  // the bar for one run alone

    // A persistent change: the newest 2 runs, or 3 of the runs since the baseline with the newest
    // among them (a disturbed run between them may be skipped), all past the bar on one side.
    std::vector<std::vector<size_t>> windows;
    const size_t nr = recent.size();
    for (size_t a = 0; a + 1 < nr; ++a) {
      for (size_t b = a + 1; b + 1 < nr; ++b)
        windows.push_back({recent[a], recent[b], recent.back()});
    }
    // A pair must be the newest two: two disturbed runs a run apart are no level.
    if (nr >= 2) windows.push_back({recent[nr - 2], recent.back()});
    // Longest first, then earliest start: the change point is the first run at the new level.
    std::stable_sort(windows.begin(), windows.end(),
                     [](const auto& x, const auto& y) { return x.size() > y.size(); });
    bool changed = false;
    for (const std::vector<size_t>& run : windows) {
      if (changed) break;
      const size_t len = run.size();
      // Every run of the window past the bar for its length, all on one side: one disturbed run
      // next to normal ones is not a change, and a big step cannot pull the quiet runs before
      // it into its window.
      std::vector<double> d;
      for (size_t r : run) d.push_back(log_median(s[r]) - level);
      std::vector<double> sorted = d;
      std::sort(sorted.begin(), sorted.end());
      const double thr = std::max(floor, o.k * sigma / std::sqrt(static_cast<double>(len)));
      if (sorted.front() <= thr && sorted.back() >= -thr) continue;
      // ... and the runs agree with each other, as runs at one new level do (two runs of one
      // level differ by noise x sqrt(2)); a disturbed run far past its neighbour is no level.
      // Of three, two must agree: the third may be a disturbed run on top of the new level.
      const double agree = o.k * sigma * std::sqrt(2.0);
      double new_level = 0;
      if (sorted[1] - sorted[0] <= agree) {
        new_level = (sorted[0] + sorted[1]) / 2;
      } else if (len == 3 && sorted[2] - sorted[1] <= agree) {
        new_level = (sorted[1] + sorted[2]) / 2;
      } else {
        continue;
      }
      const double pv = mann_whitney_p(pooled(s, run), ref_samples);
      if (pv >= o.alpha) continue;
      // The change point: the first run of the window at the new level (not a disturbed run
      // before it that happened to be off the same way).
      size_t first = 0;
      while (std::abs(d[first] - new_level) > agree) ++first;
      const std::vector<size_t> at_level(run.begin() + static_cast<std::ptrdiff_t>(first),
                                         run.end());
      out.push_back({new_level > 0 ? "regression" : "improvement", s[at_level.front()].run_id,
                     p.run_id, static_cast<int>(len), rel(new_level), rel(thr), rel(sigma), pv,
                     fmt::format("{} runs at the new level", len)});
      // Runs before the change point leave `recent` for the old baseline; the new level is the
      // baseline from here on.
      for (size_t r : recent) {
        if (r < at_level.front()) absorb(r, single[r] ? &*single[r] : nullptr);
      }
      base = at_level;
      for (size_t r : at_level) segment.push_back(r);
      recent.clear();
      changed = true;
    }
    if (changed) continue;
    // One run off alone: noted, and said when it leaves `recent` without a change behind it.
    const double d = log_median(p) - level;
    if (std::abs(d) > thr1) {
      const double pv = mann_whitney_p(p.samples, ref_samples);
      if (pv < o.alpha) {
        flagged[i] = true;
        single[i] = Alert{"suspicious",
                          p.run_id,
                          p.run_id,
                          1,
                          rel(d),
                          rel(thr1),
                          rel(sigma),
                          pv,
                          "one run off; the next runs decide"};
      }
    }
    if (recent.size() > 3) {
      const size_t r = recent.front();
      recent.erase(recent.begin());
      absorb(r, single[r] ? &*single[r] : nullptr);
    }
  }
  for (size_t r : recent) {
    if (single[r]) out.push_back(*single[r]);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Alert& a, const Alert& b) { return a.run_id < b.run_id; });
  return out;
}

}  // namespace crucible::reports
