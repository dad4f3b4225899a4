// The store's history as the detector judges it: every series loaded in run order, calibrated
// noise as a floor, judge_history's verdict. `regressions` lists it; `compare` consults it.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <vector>

#include "crucible/reports/detect_history.h"
#include "crucible/reports/records.h"
#include "crucible/reports/store.h"

namespace crucible::reports::detail {

struct JudgedStore {
  std::vector<HistorySeries> series;
  std::vector<std::vector<int64_t>> result_ids;  // parallel to each series' points
  HistoryVerdict verdict;                        // parallel to series
};

// The series `q` selects (suite, model; every backend, the others being the reference),
// judged with `q.reference` as the reference; `calibrations` (newest first) floor the noise of
// the times they measured.
JudgedStore judge_store(sqlite3* db, const std::vector<Calibration>& calibrations,
                        const RegressionQuery& q);

}  // namespace crucible::reports::detail
