// Helpers the detector's steps share (detect.cpp, detect_stats.cpp, detect_history.cpp,
// detect_short_step.cpp): medians, log levels, noise and floors. Internal to crucible_reports.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "crucible/reports/detect.h"

namespace crucible::reports::detail {

// The log of a run's median sample: the detector's level unit.
double log_median(const SeriesPoint& p);

// Run-to-run noise in log units over the runs `hist` of `s` (indices, in order), floored by the
// runs' own sampling error and by `prior` (see detect_stats.cpp).
double noise_of(const std::vector<SeriesPoint>& s, const std::vector<size_t>& hist, double prior);

// exp(x) - 1: a log change as a relative one.
double rel(double log_change);

// The median log level of the newest `window` runs of `runs` (indices into `s`): a level.
double window_level(const std::vector<SeriesPoint>& s, const std::vector<size_t>& runs, int window);

// The samples of runs `idx` of `s`, pooled.
std::vector<double> pooled(const std::vector<SeriesPoint>& s, const std::vector<size_t>& idx);

// The smallest change ever reported at `level` (log units): the relative floor, or the absolute
// one over the level, whichever is larger.
double floor_at(const DetectorOptions& o, double level);

// The smallest step a short baseline of `runs` runs reports, for a stand-in noise `sigma` (log
// units; detect_short_step.cpp).
double short_baseline_bar(const DetectorOptions& o, double level, double sigma, size_t runs);

// A step that starts at the newest baseline run `p` and holds at run `i` (detect_short_step.cpp):
// judged by the full rule where the baseline `before` is full (`sigma` its noise), by the
// short-baseline rule where it is short (`sigma` a stand-in noise, what every ratio moved at
// those runs included; `own_sigma` the series' own runs' alone, which decides whether a step is
// listed). nullopt: no step.
std::optional<Alert> step_at_newest_run(const std::vector<SeriesPoint>& s,
                                        const std::vector<size_t>& before, size_t p, size_t i,
                                        double sigma, double own_sigma, bool short_baseline,
                                        const DetectorOptions& o);

}  // namespace crucible::reports::detail
