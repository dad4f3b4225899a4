// Which kernels' per-call times moved most between two stored results: the attribution both
// `regressions` and `compare` give for a timing change.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

namespace crucible::reports {

// The three kernels whose per-call time moved most from result `before` to result `after`, as
// "name +12.3 us, ..." ("" when neither has kernel timings).
std::string moved_kernels(sqlite3* db, int64_t before, int64_t after);

}  // namespace crucible::reports
