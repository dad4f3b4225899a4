// Helpers the detector's steps share (detect.cpp, detect_stats.cpp, detect_history.cpp): medians,
// log levels and the run-to-run noise of a series. Internal to crucible_reports.
#pragma once

#include <cstddef>
#include <vector>

#include "crucible/reports/detect.h"

namespace crucible::reports::detail {

double median_of(std::vector<double> v);

// The log of a run's median sample: the detector's level unit.
double log_median(const SeriesPoint& p);

// Run-to-run noise in log units over the runs `hist` of `s` (indices, in order), floored by the
// runs' own sampling error and by `prior` (see detect_stats.cpp).
double noise_of(const std::vector<SeriesPoint>& s, const std::vector<size_t>& hist, double prior);

// exp(x) - 1: a log change as a relative one.
double rel(double log_change);

}  // namespace crucible::reports::detail
