// Pools the timings of one model taken in several worker processes (`--processes N`), the way
// pyperf spreads its samples over processes: per-process effects average out of the medians.
#pragma once

#include "crucible/reports/records.h"

namespace crucible {

// Adds `more` (the same backend, timed in a later process) to `into`: samples and counter series
// are appended; a failed audit in either process fails the pool; the pool is noisy when either was,
// keeping the first noisy process's contention figures and reason (else the latest process's).
void pool_timing(reports::ResultRecord& into, const reports::ResultRecord& more);

}  // namespace crucible
