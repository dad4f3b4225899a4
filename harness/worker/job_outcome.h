// Turns how a worker ended (exit code, signal, timeout, peak RSS) and what its report holds into
// one result per backend it was asked about: a crash or hang becomes a status, never a lost result.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "crucible/reports/records.h"
#include "subprocess.h"
#include "worker.h"
#include "worker_report.h"

namespace crucible {

// The last few non-empty lines of a worker's log, joined by " | ", control bytes escaped: the
// message an abort or an uncaught error left behind, fit for a one-line message or a stored error.
std::string log_tail(const std::filesystem::path& log, size_t max_lines = 3);

std::vector<reports::ResultRecord> finalize_job(const WorkerJob& job, const ChildOutcome& outcome,
                                                const WorkerReport& report,
                                                const std::filesystem::path& log,
                                                const ChildLimits& limits);

}  // namespace crucible
