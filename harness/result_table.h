// The console table printed at the end of a run: one row per result.
#pragma once

#include <string>
#include <vector>

#include "crucible/reports/records.h"

namespace crucible {

// Columns: suite/model, backend, mode, status, median ms, speedup, compile s, peak MB, max error.
std::string format_result_table(const std::vector<reports::ResultRecord>& results);

}  // namespace crucible
