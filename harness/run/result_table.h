// The console table printed at the end of a run: one row per result, then each suite's geomean
// speed-up per backend.
#pragma once

#include <string>
#include <vector>

#include "crucible/reports/records.h"

namespace crucible {

// Columns: suite/model, backend, mode, status, median ms, speedup (over crucible's eager), the
// speed-up over the peer (reports/peer.h) when the run has it, compile s, peak MB, max error.
// Under each result that did not pass, its reason: the error's first line cut to the console's
// width, or all of it, indented, when `verbose`.
std::string format_result_table(const std::vector<reports::ResultRecord>& results,
                                bool verbose = false);

// The reason line(s) printed under a result that did not pass ("" for a pass without error).
std::string format_reason(const reports::ResultRecord& r, bool verbose);

// One line per (suite, backend) with performance results: the geometric mean of the speed-ups over
// crucible's eager of its passing models, as PyTorch's dashboard summarises a suite; then the same
// over all suites when there are several; then, when the run has the peer, the same over the peer.
// Each line names its baseline. Empty when no backend other than eager has a speed-up.
std::string format_speedup_summary(const std::vector<reports::ResultRecord>& results);

}  // namespace crucible
