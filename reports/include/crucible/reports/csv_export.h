// CSV exports in the column order of PyTorch's dynamo benchmark CSVs, so existing dashboards and
// scripts that read those files read ours.
#pragma once

#include <filesystem>
#include <vector>

#include "crucible/reports/records.h"

namespace crucible::reports {

// Writes <dir>/<backend>_performance.csv (dev, name, batch_size, speedup, abs_latency,
// compilation_latency, compression_ratio, eager_peak_mem, dynamo_peak_mem, then speedup_vs_<peer>
// when the peer ran, audited (0 under --no-audit), audit_share, audit_coverage) and
// <dir>/<backend>_accuracy.csv (dev, name, batch_size, accuracy) for each backend with results of
// that mode. Returns the files written. Memory columns are in GB as PyTorch writes them.
std::vector<std::filesystem::path> write_dynamo_csvs(const std::filesystem::path& dir,
                                                     const std::vector<ResultRecord>& results);

}  // namespace crucible::reports
