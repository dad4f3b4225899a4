// The expected-accuracy gate's rules: each suite keeps, per backend, the status every model is
// expected to reach; a result is judged against it as PyTorch's check_accuracy.py does.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crucible/reports/status.h"

namespace crucible::reports {

enum class ExpectedVerdict { kPass, kXfail, kImproved, kFail, kNew, kFlaky };

// "PASS", "XFAIL", "IMPROVED", "FAIL", "NEW", "FLAKY".
std::string_view verdict_name(ExpectedVerdict v);

// FAIL is a regression; IMPROVED and NEW mean the checked-in expectations are out of date.
bool fails_gate(ExpectedVerdict v);

// Pass <-> not-pass flips in a status history (oldest first).
int status_flips(const std::vector<Status>& history);

// The verdict on `got` against `expected` (nullopt: the model is not in the file), FLAKY when the
// history flipped at least `flaky_flips` times.
ExpectedVerdict judge_expected(Status got, std::optional<Status> expected, int flips,
                               int flaky_flips);

// suites/<suite>/expected/<backend>.csv ("name,accuracy" header, then name,status per model):
// name -> status. A missing file is an empty map (every model NEW); a malformed line or an
// unknown status throws Error naming file and line.
std::map<std::string, Status> read_expected_csv(const std::filesystem::path& csv);
// Writes `expected` in that format; throws Error when the file cannot be written.
void write_expected_csv(const std::filesystem::path& csv,
                        const std::map<std::string, Status>& expected);

}  // namespace crucible::reports
