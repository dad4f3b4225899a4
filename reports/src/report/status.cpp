// Status names (see status.h).
#include "crucible/reports/status.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace crucible::reports {

namespace {

constexpr std::array<std::pair<Status, std::string_view>, 14> kNames = {{
    {Status::kPass, "pass"},
    {Status::kFailAccuracy, "fail_accuracy"},
    {Status::kFailToCompile, "fail_to_compile"},
    {Status::kFailToRun, "fail_to_run"},
    {Status::kFailToLoad, "fail_to_load"},
    {Status::kCrash, "crash"},
    {Status::kTimeout, "timeout"},
    {Status::kOom, "oom"},
    {Status::kEagerFailToRun, "eager_fail_to_run"},
    {Status::kEagerTwoRunsDiffer, "eager_two_runs_differ"},
    {Status::kSkipped, "skipped"},
    {Status::kXfail, "xfail"},
    {Status::kFailAccuracyInPerf, "fail_accuracy_in_perf"},
    {Status::kFailAudit, "fail_audit"},
}};

}  // namespace

std::string_view status_name(Status s) {
  for (const auto& [status, name] : kNames) {
    if (status == s) return name;
  }
  return "unknown";
}

std::optional<Status> status_from_name(std::string_view name) {
  for (const auto& [status, n] : kNames) {
    if (n == name) return status;
  }
  return std::nullopt;
}

bool is_success(Status s) {
  return s == Status::kPass || s == Status::kSkipped || s == Status::kXfail;
}

std::string sql_success_names() {
  std::string out;
  for (const auto& [status, name] : kNames) {
    if (is_success(status)) out += fmt::format("{}'{}'", out.empty() ? "" : ", ", name);
  }
  return out;
}

std::ostream& operator<<(std::ostream& out, Status s) { return out << status_name(s); }

}  // namespace crucible::reports
