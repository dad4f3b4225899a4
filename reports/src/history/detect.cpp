// The change detector on one series (see detect.h), as steps over its runs: split by environment
// and by the level breaks the history gives, find where the level of a new baseline starts, then
// judge each run against the level: a change must hold on each of 2 or 3 consecutive runs, on one
// side, past a bar of k x noise / sqrt(runs), so one disturbed run makes a `suspicious` note but
// never a regression; its change point is the first run at the new level, its size the new level
// less the old.
#include "crucible/reports/detect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>

#include "crucible/reports/records.h"
#include "detect_internal.h"

namespace crucible::reports {

using detail::floor_at;
using detail::log_median;
using detail::noise_of;
using detail::pooled;
using detail::rel;

namespace {

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

// Sum of |x - median| over logs[from, to): the cost of one level there (L1, so a disturbed run
// weighs by its distance, not its square).
double level_cost(const std::vector<double>& logs, size_t from, size_t to) {
  const double m = median({logs.begin() + static_cast<std::ptrdiff_t>(from),
                           logs.begin() + static_cast<std::ptrdiff_t>(to)});
  double c = 0;
  for (size_t i = from; i < to; ++i) c += std::abs(logs[i] - m);
  return c;
}

}  // namespace

size_t latest_level_start(const std::vector<SeriesPoint>& s, const std::vector<size_t>& runs,
                          double sigma, const DetectorOptions& o) {
  std::vector<double> logs;
  logs.reserve(runs.size());
  for (size_t i : runs) logs.push_back(log_median(s[i]));
  const size_t n = logs.size();
  size_t start = 0;
  // Binary segmentation of the tail: the best single split of [start, n) with 2 runs on each side,
  // kept when the runs after it hold the new level; then the same on what follows it.
  for (;;) {
    size_t best = 0;
    double best_cost = level_cost(logs, start, n);
    for (size_t j = start + 2; j + 2 <= n; ++j) {
      const double c = level_cost(logs, start, j) + level_cost(logs, j, n);
      if (c < best_cost) best_cost = c, best = j;
    }
    if (best == 0) return start;
    const double old_level = median({logs.begin() + static_cast<std::ptrdiff_t>(start),
                                     logs.begin() + static_cast<std::ptrdiff_t>(best)});
    const double d =
        median({logs.begin() + static_cast<std::ptrdiff_t>(best), logs.end()}) - old_level;
    const double thr =
        std::max(floor_at(o, old_level),
                 o.k * sigma / std::sqrt(static_cast<double>(std::min<size_t>(n - best, 3))));
    bool held = std::abs(d) > thr;
    for (size_t i = best; i < n && held; ++i) held = (logs[i] - old_level) * (d > 0 ? 1 : -1) > thr;
    const std::vector<size_t> before(runs.begin() + static_cast<std::ptrdiff_t>(start),
                                     runs.begin() + static_cast<std::ptrdiff_t>(best));
    const std::vector<size_t> after(runs.begin() + static_cast<std::ptrdiff_t>(best), runs.end());
    if (!held || mann_whitney_p(pooled(s, after), pooled(s, before)) >= o.alpha) return start;
    start = best;
  }
}

namespace {

// The walk over one series' runs. Each run is a step through: its status, the environment and
// level breaks, and then the judgement of its timing against the current level.
class SeriesJudge {
 public:
  SeriesJudge(const std::vector<SeriesPoint>& s, const DetectorOptions& o,
              std::vector<std::string>* not_judged)
      : s_(s), o_(o), not_judged_(not_judged), single_(s.size()) {
    if (not_judged_ != nullptr) not_judged_->assign(s.size(), "");
  }

  std::vector<Alert> run() {
    std::optional<size_t> last_timed;
    std::optional<Status> last_status;
    for (size_t i = 0; i < s_.size(); ++i) {
      const SeriesPoint& p = s_[i];
      if (last_status == Status::kPass && p.status && p.status != Status::kPass) {
        out_.push_back({"status", p.run_id, p.run_id, 1, 0, 0, 0, 1,
                        fmt::format("pass -> {}", status_name(*p.status))});
      }
      if (p.status) last_status = p.status;
      if (p.samples.empty()) continue;
      if (p.noisy) {
        unjudged(i, p.set_aside.empty() ? "not judged (the harness flagged this run noisy)"
                                        : "not judged (" + p.set_aside + ")");
        if (last_timed && s_[*last_timed].fingerprint == p.fingerprint) timed_.push_back(i);
        continue;
      }
      if (last_timed && s_[*last_timed].fingerprint != p.fingerprint) {
        start_environment(*last_timed, i);
      } else if (last_timed && breaks_between(s_[*last_timed].run_id, p.run_id)) {
        start_level(i);
      }
      last_timed = i;
      timed_.push_back(i);
      judge(i);
    }
    for (size_t r : recent_) {
      if (single_[r]) out_.push_back(*single_[r]);
    }
    std::stable_sort(out_.begin(), out_.end(),
                     [](const Alert& a, const Alert& b) { return a.run_id < b.run_id; });
    return std::move(out_);
  }

  // The smallest step the series can show now: on a full baseline a change over 3 runs, each
  // past max(floor, k x noise / sqrt 3); on a ratio's short baseline what the short rule reports
  // (a time alone shows none until its baseline is full).
  DetectionFloor detection_floor() const {
    if (base_.empty()) return {};
    if (segment_.size() >= static_cast<size_t>(o_.min_baseline) &&
        base_.size() >= min_level_runs()) {
      return {rel(std::max(floor_at(o_, base_level()), o_.k * noise() / std::sqrt(3.0))),
              rel(noise()), 0};
    }
    if (!std::isfinite(s_[base_.back()].own_log)) return {};
    const double sigma =
        short_noise(base_, s_.size(), SIZE_MAX, s_[base_.back()].run_spread).stand_in;
    return {rel(detail::short_baseline_bar(o_, base_level(), sigma, base_.size())), rel(sigma),
            static_cast<int>(base_.size())};
  }

 private:
  void unjudged(size_t i, std::string why) {
    if (not_judged_ != nullptr) (*not_judged_)[i] = std::move(why);
  }

  // A level break (from o.level_breaks) in (after, upto]: the history says the level moved there.
  bool breaks_between(int64_t after, int64_t upto) const {
    return std::any_of(o_.level_breaks.begin(), o_.level_breaks.end(),
                       [&](int64_t b) { return b > after && b <= upto; });
  }

  // A run leaving `recent` joins the baseline; if it was off alone, that is said now.
  void absorb(size_t i) {
    base_.push_back(i);
    segment_.push_back(i);
    if (single_[i]) out_.push_back(*single_[i]);
  }

  // A new environment: a new baseline, its noise and level measured afresh.
  void start_environment(size_t last, size_t i) {
    if (recent_.empty()) note_last_short_run(last);
    for (size_t r : recent_) absorb(r);
    out_.push_back(
        {"environment", s_[i].run_id, s_[i].run_id, 1, 0, 0, 0, 1,
         "a new baseline starts: " + fingerprint_change(s_[last].fingerprint, s_[i].fingerprint)});
    previous_diffs_ = diffs_with_noisy_runs(0, s_.size(), SIZE_MAX);
    timed_.clear();
    base_.clear();
    segment_.clear();
    recent_.clear();
    level_checked_ = false;
  }

  // The last run of an environment whose baseline was still short, off its level past what a
  // short baseline reports of one run: no later run of that environment can confirm it, so it
  // is listed, not dropped. (On a full baseline a run off alone is already `suspicious`.)
  void note_last_short_run(size_t last) {
    if (base_.size() < 2 || base_.back() != last || !std::isfinite(s_[last].own_log)) return;
    const std::vector<size_t> before(base_.begin(), base_.end() - 1);
    const double level = detail::window_level(s_, before, o_.window);
    const double d = log_median(s_[last]) - level;
    const double sigma =
        short_noise(before, last + 1, SIZE_MAX, s_[before.back()].run_spread).stand_in;
    // One run's step over the baseline wobbles by sigma x sqrt(1 + 1/k), not sqrt(1/2 + 1/k).
    const double nb = static_cast<double>(before.size());
    const double bar = detail::short_baseline_bar(o_, level, sigma, before.size()) *
                       std::sqrt((1 + 1 / nb) / (0.5 + 1 / nb));
    if (std::abs(d) <= bar ||
        mann_whitney_p(s_[last].samples, pooled(s_, {before.back()})) >= o_.alpha)
      return;
    out_.push_back({"absorbed", s_[last].run_id, s_[last].run_id, 1, rel(d), rel(bar), rel(sigma),
                    1,
                    fmt::format("absorbed into the baseline: {:+.1f}% at run {} (the last run "
                                "of its environment: no later run can confirm it)",
                                100 * rel(d), s_[last].run_id)});
  }

  // A machine-wide shift: a new level from run i; the noise carries on, it did not change.
  void start_level(size_t i) {
    for (size_t r : recent_) absorb(r);
    base_.clear();
    recent_.clear();
    level_checked_ = true;  // the break is where the level starts
    broken_ = s_[i].run_id;
  }

  double noise() const {
    const std::vector<size_t> hist(segment_.end() - std::min<size_t>(segment_.size(), 60),
                                   segment_.end());
    return noise_of(s_, hist, o_.prior_noise);
  }

  // Runs at one level before the next run is judged against it: kMinLevelRuns, or the whole
  // baseline a measure needs where that is shorter (instruction counts: 3).
  size_t min_level_runs() const {
    return std::min(kMinLevelRuns, static_cast<size_t>(std::max(o_.min_baseline, 1)));
  }

  void judge(size_t i) {
    const size_t min_baseline = static_cast<size_t>(o_.min_baseline);
    if (segment_.size() >= min_baseline && !level_checked_) check_warm_up();
    const bool short_baseline = segment_.size() < min_baseline || base_.size() < min_level_runs();
    if ((short_baseline || recent_.empty()) && step_at_newest_base_run(i, short_baseline)) return;
    if (short_baseline) {
      // "k of n": this run is the k-th of the n a baseline needs; the run after the n-th is
      // judged.
      if (segment_.size() < min_baseline) {
        unjudged(i, fmt::format("not judged ({} of {} baseline runs)", segment_.size() + 1,
                                min_baseline));
      } else if (broken_ != 0) {
        unjudged(i, fmt::format("not judged (a new level after the machine-wide shift at run {}: "
                                "{} of {} runs at it)",
                                broken_, base_.size() + 1, min_level_runs()));
      } else {
        unjudged(i, fmt::format("not judged (a new level: {} of {} runs at it)", base_.size() + 1,
                                min_level_runs()));
      }
      base_.push_back(i);
      segment_.push_back(i);
      return;
    }
    broken_ = 0;
    const double sigma = noise();
    if (o_.max_noise > 0 && sigma > std::log1p(o_.max_noise)) {
      unjudged(i, fmt::format("not judged (too noisy: run-to-run {:.1f}% > {:.1f}%)",
                              100 * rel(sigma), 100 * o_.max_noise));
      base_.push_back(i);
      segment_.push_back(i);
      return;
    }
    recent_.push_back(i);
    if (confirm_change(i, sigma)) return;
    note_single(i, sigma);
    if (recent_.size() > 3) {
      const size_t r = recent_.front();
      recent_.erase(recent_.begin());
      absorb(r);
    }
  }

  // The first judgement of an environment: its warm-up runs may hold a level change of their own,
  // and the level is what came after it, not a mean across it. A change there that no short
  // baseline step took is listed, not dropped.
  void check_warm_up() {
    const size_t from = latest_level_start(s_, base_, noise(), o_);
    level_checked_ = true;
    if (from == 0) return;
    std::vector<double> old_logs, new_logs;
    for (size_t k = 0; k < base_.size(); ++k)
      (k < from ? old_logs : new_logs).push_back(log_median(s_[base_[k]]));
    const double change = median(new_logs) - median(old_logs);
    const int64_t at = s_[base_[from]].run_id;
    out_.push_back({"absorbed", at, s_[base_.back()].run_id, static_cast<int>(new_logs.size()),
                    rel(change), 0, rel(noise()), 1,
                    fmt::format("absorbed into the baseline: {:+.1f}% at run {} (a level change "
                                "in the first runs of this environment)",
                                100 * rel(change), at)});
    base_.erase(base_.begin(), base_.begin() + static_cast<std::ptrdiff_t>(from));
  }

  // The differences of consecutive timed runs of this environment (noisy ones too) in
  // [from, to), none across a step at `step`.
  std::vector<double> diffs_with_noisy_runs(size_t from, size_t to, size_t step) const {
    std::vector<double> diff;
    for (size_t k = 1; k < timed_.size(); ++k) {
      const size_t a = timed_[k - 1], b = timed_[k];
      if (a >= from && b < to && !(a < step && b >= step))
        diff.push_back(std::abs(log_median(s_[b]) - log_median(s_[a])));
    }
    return diff;
  }

  // A short baseline's noise (log units) over the level `level` and its runs up to `to`, as
  // noise_of measures it (differences widened for a few from 3 on), none across a step at
  // `step`, never below the level's newest run's sampling error: `own`. Runs the harness flagged
  // noisy count here, and the previous environment's differences are pooled in: a baseline of a
  // few runs cannot show a series' noise, and how noisy it was there or how often disturbed is
  // evidence. `stand_in` is that, or with fewer than 3 differences `spread` (what every series
  // moved at those runs) where larger.
  struct ShortNoise {
    double own = 0, stand_in = 0;
  };
  ShortNoise short_noise(const std::vector<size_t>& level, size_t to, size_t step,
                         double spread) const {
    std::vector<double> diff = diffs_with_noisy_runs(level.front(), to, step);
    diff.insert(diff.end(), previous_diffs_.begin(), previous_diffs_.end());
    const double n = static_cast<double>(diff.size());
    const double run_to_run =
        diff.empty() ? 0.0 : 1.4826 * median(diff) / std::sqrt(2.0) * (n >= 3 ? 1 + 2.0 / n : 1.0);
    const double own = std::max(noise_of(s_, {level.back()}, o_.prior_noise), run_to_run);
    return {own, std::max(own, diff.size() < 3 ? spread / std::sqrt(2.0) : 0.0)};
  }

  // A step that starts at the newest baseline run and holds at run i: on a short baseline (with
  // a stand-in noise: the runs' own, noisy ones and the previous environment's too, and what
  // every series moved at those runs), or at the first run judged after a full one. Its runs are
  // then the new level.
  bool step_at_newest_base_run(size_t i, bool short_baseline) {
    // Only a ratio can tell its backend's step from the machine's on a few runs; a time alone
    // waits for the full rule (its warm-up's level changes are listed at its end).
    if (base_.size() < 2 || !std::isfinite(s_[i].own_log)) return false;
    const size_t p = base_.back();
    const std::vector<size_t> before(base_.begin(), base_.end() - 1);
    double sigma = noise(), own_sigma = sigma;
    if (short_baseline) {
      const double spread =
          std::max({s_[before.back()].run_spread, s_[p].run_spread, s_[i].run_spread});
      const double runs_own = std::max(noise_of(s_, {p}, 0), noise_of(s_, {i}, 0));
      const ShortNoise n = short_noise(before, i + 1, p, spread);
      sigma = std::max(n.stand_in, runs_own);
      own_sigma = std::max(n.own, runs_own);
    } else if (o_.max_noise > 0 && sigma > std::log1p(o_.max_noise)) {
      return false;
    }
    std::optional<Alert> step =
        detail::step_at_newest_run(s_, before, p, i, sigma, own_sigma, short_baseline, o_);
    if (!step) return false;
    if (step->kind == "absorbed") {
      unjudged(i, fmt::format("not judged (a new level: 2 of {} runs at it)", min_level_runs()));
    }
    out_.push_back(std::move(*step));
    base_ = {p, i};
    segment_.push_back(i);
    return true;
  }

  // A persistent change: the newest 2 runs, or 3 of the runs since the baseline with the newest
  // among them (a disturbed run between them may be skipped), all past the bar on one side.
  // The level of the baseline: the median log level of its newest o.window runs.
  double base_level() const { return detail::window_level(s_, base_, o_.window); }

  // The windows of recent runs a change may be confirmed by: 3 of them with the newest (a
  // disturbed run between may be skipped), the newest 2 (two disturbed runs a run apart are no
  // level), and for a deterministic measure the newest alone. Longest first, then earliest
  // start: the change point is the first run at the new level.
  std::vector<std::vector<size_t>> candidate_windows() const {
    std::vector<std::vector<size_t>> windows;
    const size_t nr = recent_.size();
    for (size_t a = 0; a + 1 < nr; ++a) {
      for (size_t b = a + 1; b + 1 < nr; ++b)
        windows.push_back({recent_[a], recent_[b], recent_.back()});
    }
    if (nr >= 2) windows.push_back({recent_[nr - 2], recent_.back()});
    if (o_.confirm_runs == 1) windows.push_back({recent_.back()});
    std::stable_sort(windows.begin(), windows.end(),
                     [](const auto& x, const auto& y) { return x.size() > y.size(); });
    return windows;
  }

  // A change that began in the newest baseline runs (the last runs of a warm-up, or a run
  // judged before the bar for one run alone could be met): those at the new level `rough`, each
  // past the one-run bar, leave the baseline and start it, oldest first; the old level is then
  // the baseline's without them. At most 3: more would have been a change of their own.
  std::vector<size_t> take_earlier_runs_at(double rough, double agree, double one_run) {
    std::vector<size_t> earlier;
    while (earlier.size() < 3 && base_.size() > earlier.size() + min_level_runs()) {
      const size_t b = base_[base_.size() - 1 - earlier.size()];
      const double db = log_median(s_[b]) - level_;
      if (std::abs(db - rough) > agree || std::abs(db) <= one_run || (db > 0) != (rough > 0)) break;
      earlier.push_back(b);
    }
    if (!earlier.empty()) {
      base_.resize(base_.size() - earlier.size());
      std::reverse(earlier.begin(), earlier.end());
      level_ = base_level();
    }
    return earlier;
  }

  bool confirm_change(size_t i, double sigma) {
    level_ = base_level();
    const size_t n_ref = std::min<size_t>(base_.size(), 3);
    ref_samples_ = pooled(s_, {base_.end() - static_cast<std::ptrdiff_t>(n_ref), base_.end()});
    const double floor = floor_at(o_, level_);
    for (const std::vector<size_t>& run : candidate_windows()) {
      const size_t len = run.size();
      // Every run of the window past the bar for its length, all on one side: one disturbed run
      // next to normal ones is not a change, and a big step cannot pull the quiet runs before
      // it into its window.
      std::vector<double> d;
      d.reserve(len);
      for (size_t r : run) d.push_back(log_median(s_[r]) - level_);
      std::vector<double> sorted = d;
      std::sort(sorted.begin(), sorted.end());
      const double thr = std::max(floor, o_.k * sigma / std::sqrt(static_cast<double>(len)));
      if (sorted.front() <= thr && sorted.back() >= -thr) continue;
      // ... and the runs agree with each other, as runs at one new level do (two runs of one
      // level differ by noise x sqrt(2)); a disturbed run far past its neighbour is no level.
      // Of three, two must agree: the third may be a disturbed run on top of the new level.
      const double agree = std::max(floor, o_.k * sigma * std::sqrt(2.0));
      double rough = 0;
      if (len == 1) {
        rough = sorted[0];
      } else if (sorted[1] - sorted[0] <= agree) {
        rough = (sorted[0] + sorted[1]) / 2;
      } else if (len == 3 && sorted[2] - sorted[1] <= agree) {
        rough = (sorted[1] + sorted[2]) / 2;
      } else {
        continue;
      }
      // The rank test on raw samples guards a noise estimate that came out low; a window whose
      // every run is past twice the bar needs no guard, and samples spread wide around steady
      // medians (+-10% about medians that hold to 0.3%) would hide a 3% step from it.
      const double pv = mann_whitney_p(pooled(s_, run), ref_samples_);
      const bool far_past = sorted.front() > 2 * thr || sorted.back() < -2 * thr;
      if (pv >= o_.alpha && !far_past) continue;
      // The change point: the first run of the window at the new level (not a disturbed run
      // before it that happened to be off the same way, even inside the tolerance).
      size_t first = 0;
      while (std::abs(d[first] - rough) > agree) ++first;
      std::vector<size_t> at_level;
      for (size_t k = first; k < len; ++k) {
        if (std::abs(d[k] - rough) <= agree) at_level.push_back(run[k]);
      }
      const std::vector<size_t> earlier =
          at_level.front() == recent_.front()
              ? take_earlier_runs_at(rough, agree, std::max(floor, o_.k * sigma))
              : std::vector<size_t>{};
      at_level.insert(at_level.begin(), earlier.begin(), earlier.end());
      // The size is the new level less the old: the median of the runs at it.
      std::vector<double> new_logs;
      new_logs.reserve(at_level.size());
      for (size_t r : at_level) new_logs.push_back(log_median(s_[r]));
      const double new_level = median(new_logs) - level_;
      out_.push_back({new_level > 0 ? "regression" : "improvement", s_[at_level.front()].run_id,
                      s_[i].run_id, static_cast<int>(len), rel(new_level), rel(thr), rel(sigma), pv,
                      fmt::format("{} runs at the new level", len)});
      // Runs before the change point leave `recent` for the old baseline; the new level is the
      // baseline from here on.
      for (size_t r : recent_) {
        if (r < at_level.front()) absorb(r);
      }
      base_ = at_level;
      segment_.insert(segment_.end(),
                      at_level.begin() + static_cast<std::ptrdiff_t>(earlier.size()),
                      at_level.end());
      recent_.clear();
      return true;
    }
    return false;
  }

  // One run off alone: noted, and said when it leaves `recent` without a change behind it.
  void note_single(size_t i, double sigma) {
    const double d = log_median(s_[i]) - level_;
    const double thr1 = std::max(floor_at(o_, level_), o_.k * sigma);
    if (std::abs(d) <= thr1) return;
    const double pv = mann_whitney_p(s_[i].samples, ref_samples_);
    if (pv < o_.alpha) {
      single_[i] = Alert{"suspicious",
                         s_[i].run_id,
                         s_[i].run_id,
                         1,
                         rel(d),
                         rel(thr1),
                         rel(sigma),
                         pv,
                         "one run off; the next runs decide"};
    }
  }

  const std::vector<SeriesPoint>& s_;
  const DetectorOptions& o_;
  std::vector<std::string>* not_judged_;
  std::vector<std::optional<Alert>> single_;  // one run off alone, not (yet) part of a change
  std::vector<Alert> out_;
  std::vector<size_t> base_;            // the baseline at the current level
  std::vector<size_t> recent_;          // judged runs newer than the baseline, up to 4
  std::vector<size_t> segment_;         // every baseline run of this environment, for the noise
  bool level_checked_ = false;          // the warm-up was searched for a level change of its own
  int64_t broken_ = 0;                  // the level break the current level started at (0: none)
  double level_ = 0;                    // the current level (log), as of the last judged run
  std::vector<double> previous_diffs_;  // the previous environment's run-to-run differences
  std::vector<size_t> timed_;           // this environment's timed runs, noisy ones too
  std::vector<double> ref_samples_;     // the newest baseline runs' samples, for the rank test
};

}  // namespace

std::vector<Alert> detect_changes(const std::vector<SeriesPoint>& s, const DetectorOptions& o,
                                  std::vector<std::string>* not_judged, DetectionFloor* floor) {
  SeriesJudge judge(s, o, not_judged);
  std::vector<Alert> alerts = judge.run();
  if (floor != nullptr) *floor = judge.detection_floor();
  return alerts;
}

}  // namespace crucible::reports
