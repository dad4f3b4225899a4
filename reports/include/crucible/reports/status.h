// The outcome of one (model, backend, mode) job: one enum, one name per value. The names are what
// the store, the worker report, the console table and the CSVs carry.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace crucible::reports {

enum class Status {
  kPass,                // ran, and accurate (accuracy) or timed (performance)
  kFailAccuracy,        // ran, but an output is outside the tolerance of the fp64 reference
  kFailToCompile,       // the backend's compile() threw
  kFailToRun,           // run() threw, or the worker exited with an error
  kFailToLoad,          // the backend's plugin could not be loaded
  kCrash,               // the worker died on a signal
  kTimeout,             // the worker outlived --timeout and was killed
  kOom,                 // the worker was killed for exceeding --memory-limit
  kEagerFailToRun,      // the eager reference itself failed, so nothing can be compared
  kEagerTwoRunsDiffer,  // two eager runs differ: the model is not deterministic
  kSkipped,             // the manifest skips this model on this backend
  kXfail,               // failed as the manifest expects
  kFailAccuracyInPerf,  // outputs taken while timing differ from the backend's checked outputs
  kFailAudit,  // the timing audit found evidence of gaming it (caching, work outside the clock)
};

// "pass", "fail_accuracy", ... (the snake_case of the enumerator).
std::string_view status_name(Status s);
// The status with that name, or nullopt.
std::optional<Status> status_from_name(std::string_view name);
// Statuses that do not fail a run: pass, skipped and expected failures.
bool is_success(Status s);
// "'pass', 'skipped', 'xfail'": the success statuses for an SQL IN list, so a query counts
// failures as is_success does.
std::string sql_success_names();
// Writes the status's name (so a test's failure message reads "fail_accuracy", not 1).
std::ostream& operator<<(std::ostream& out, Status s);

}  // namespace crucible::reports
