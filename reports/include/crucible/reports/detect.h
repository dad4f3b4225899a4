// Regression detection on one series (a model on a backend, or its time over a reference's, run
// after run): a change is reported when a rank test on raw samples is significant and the level
// moved more than max(floor, k x the series' own run-to-run noise) on consecutive runs.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crucible/reports/status.h"

namespace crucible::reports {

// One run of a series, oldest first.
struct SeriesPoint {
  int64_t run_id = 0;
  std::string fingerprint;  // the run's environment, "key=value;...": a change starts a baseline
  std::optional<Status> status;  // the result's status (nullopt: none recorded)
  std::vector<double> samples;   // raw timed samples (performance), empty for accuracy
  bool noisy = false;     // the harness measured contention around it: its time is not judged
  std::string commit;     // the code it measured (for an alert's commit range), "" unknown
  std::string set_aside;  // why the history set this run aside (noisy is then true), or ""
  // A ratio's point (a time over the reference's in the same run): the log medians of its two
  // sides, so a step found on a short baseline can be told from a move of the reference or of
  // the machine. NaN: not a ratio.
  double own_log = std::nan("");
  double reference_log = std::nan("");
  // How far comparable series moved at this run against their previous run (log units,
  // 1.4826 x their median |move|): what the machine did to every series then. 0: unknown.
  double run_spread = 0;
  // The machine's level at this run (log units): the running sum of every time series' median
  // move run to run. A ratio's sides are judged by how far they moved beyond it. NaN: unknown.
  double machine_log = std::nan("");
};

struct DetectorOptions {
  double floor = 0.01;      // smallest relative change ever reported
  double floor_abs = 0;     // ... and smallest absolute one, in the samples' unit (0: none)
  double k = 4.0;           // noise multiples a persistent change must exceed (on its mean)
  double alpha = 0.01;      // rank-test significance
  int min_baseline = 8;     // runs of one environment before anything is judged
  int window = 20;          // baseline runs the level and the noise are taken from
  double prior_noise = 0;   // run-to-run noise known from calibration (log units), 0: none
  double max_noise = 0.10;  // a series noisier than this run to run (relative) is not judged
  int confirm_runs = 2;     // runs at a new level that make a change (1: a deterministic measure)
  // Runs where the history found a machine-wide shift (see detect_history.h): a new level starts
  // there, as after a change, without an alert; the noise history carries on.
  std::vector<int64_t> level_breaks;
};

struct Alert {
  // regression | improvement: a change that persisted over `runs` consecutive runs;
  // suspicious: one run off alone; accuracy: pass -> non-pass; environment: a new baseline;
  // absorbed: a step found on a short baseline and not reported as a change (the note says why);
  // with_event: a ratio change at a machine-wide shift no larger than the shift bent others.
  std::string kind;
  int64_t run_id = 0;        // the first run at the new level (the change point)
  int64_t confirmed_by = 0;  // the run that made it certain (run_id for one-run kinds)
  int runs = 1;
  double change = 0;     // relative change of the median (+0.05: 5% slower)
  double threshold = 0;  // the relative change it had to exceed
  double noise = 0;      // the series' run-to-run noise (relative) it was judged against
  double p_value = 1;    // Mann-Whitney U, the new runs' samples against the baseline's
  std::string note;
};

// Every alert of `series`, in run order.
// A step found while the baseline is short (fewer runs than opts.min_baseline, or a new level
// still forming) is never dropped: it is a `regression`/`improvement` noted "short baseline (k
// runs)" when it is far past the series' noise and the series' own move (see short-baseline rule
// in detect.cpp), and an `absorbed` alert with its size, run and why otherwise.
// With `not_judged`, also why each timed run was not judged ("" for one that was, or has no
// timing): "not judged (k of n baseline runs)" while the environment has fewer than
// n = opts.min_baseline runs before it (the run after the n-th is judged), "not judged (a new
// level: k of m runs at it)" right after a change or a level break,
// "not judged (too noisy: ...)" past opts.max_noise, or the noisy flag.
// With `floor`, also the smallest step the series can show after its newest run and the
// run-to-run noise it is judged against (NaN: a time alone still forming its baseline).
struct DetectionFloor {
  double step = std::nan("");   // relative: max(floor, k x noise / sqrt 3) on a full baseline
  double noise = std::nan("");  // relative
  int short_baseline = 0;       // the runs of a short baseline it holds for (0: a full one)
};
std::vector<Alert> detect_changes(const std::vector<SeriesPoint>& series,
                                  const DetectorOptions& opts = {},
                                  std::vector<std::string>* not_judged = nullptr,
                                  DetectionFloor* floor = nullptr);

// Where the current level of `runs` (indices into `series`, in order, one environment) starts:
// binary segmentation with an L1 cost, each split kept when every run after it is past the bar
// (opts.k x sigma, sigma in log units) on one side and the rank test agrees. 0: one level.
size_t latest_level_start(const std::vector<SeriesPoint>& series, const std::vector<size_t>& runs,
                          double sigma, const DetectorOptions& opts);

// The series' run-to-run noise (relative) as the detector measures it, over its timed runs that
// are not flagged noisy; `prior` is a floor (a calibrated value).
double series_noise(const std::vector<SeriesPoint>& series, double prior = 0);

// A 95% percentile-bootstrap interval of median(b) / median(a) - 1 (1,000 resamples, a fixed
// seed: the same samples give the same interval). {NaN, NaN} when either side is empty.
std::pair<double, double> median_change_interval(const std::vector<double>& a,
                                                 const std::vector<double>& b);

// The same interval for a speed-up's change between two runs: the speed-up is median(eager) /
// median(backend) within a run, and all four sample sets are resampled together, so the interval
// carries the noise of both backends in both runs.
std::pair<double, double> speedup_change_interval(const std::vector<double>& eager_a,
                                                  const std::vector<double>& backend_a,
                                                  const std::vector<double>& eager_b,
                                                  const std::vector<double>& backend_b);

// Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction);
// 1 when either side is empty.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace crucible::reports
