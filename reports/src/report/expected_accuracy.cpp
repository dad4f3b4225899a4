// The expected-accuracy gate's rules and its CSV files (see expected_accuracy.h).
#include "crucible/reports/expected_accuracy.h"

#include <fmt/format.h>

#include <fstream>

#include "crucible/core/error.h"
#include "crucible/core/quote.h"

namespace crucible::reports {

std::string_view verdict_name(ExpectedVerdict v) {
  switch (v) {
    case ExpectedVerdict::kPass:
      return "PASS";
    case ExpectedVerdict::kXfail:
      return "XFAIL";
    case ExpectedVerdict::kImproved:
      return "IMPROVED";
    case ExpectedVerdict::kFail:
      return "FAIL";
    case ExpectedVerdict::kNew:
      return "NEW";
    case ExpectedVerdict::kFlaky:
      return "FLAKY";
  }
  return "?";
}

bool fails_gate(ExpectedVerdict v) {
  return v == ExpectedVerdict::kFail || v == ExpectedVerdict::kImproved ||
         v == ExpectedVerdict::kNew;
}

int status_flips(const std::vector<Status>& history) {
  int n = 0;
  for (size_t i = 1; i < history.size(); ++i) {
    n += (history[i] == Status::kPass) != (history[i - 1] == Status::kPass) ? 1 : 0;
  }
  return n;
}

ExpectedVerdict judge_expected(Status got, std::optional<Status> expected, int flips,
                               int flaky_flips) {
  if (flips >= flaky_flips) return ExpectedVerdict::kFlaky;
  if (!expected) return ExpectedVerdict::kNew;
  if (got == *expected)
    return got == Status::kPass ? ExpectedVerdict::kPass : ExpectedVerdict::kXfail;
  return got == Status::kPass ? ExpectedVerdict::kImproved : ExpectedVerdict::kFail;
}

std::map<std::string, Status> read_expected_csv(const std::filesystem::path& csv) {
  std::map<std::string, Status> out;
  std::ifstream in(csv);
  if (!in) return out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n == 1) {
      if (line.rfind("name,accuracy", 0) != 0) {
        throw Error(fmt::format("{}:1: header must start with name,accuracy, got '{}'",
                                csv.string(), escape_controls(line)));
      }
      continue;
    }
    if (line.empty()) continue;
    const size_t c1 = line.find(','), c2 = line.find(',', c1 + 1);
    if (c1 == std::string::npos || c1 == 0) {
      throw Error(fmt::format("{}:{}: want name,accuracy, got '{}'", csv.string(), n,
                              escape_controls(line)));
    }
    const std::string name = line.substr(c1 + 1, c2 == std::string::npos ? c2 : c2 - c1 - 1);
    const std::optional<Status> status = status_from_name(name);
    if (!status) {
      throw Error(
          fmt::format("{}:{}: '{}' is not a status", csv.string(), n, escape_controls(name)));
    }
    out[line.substr(0, c1)] = *status;
  }
  return out;
}

void write_expected_csv(const std::filesystem::path& csv,
                        const std::map<std::string, Status>& expected) {
  std::filesystem::create_directories(csv.parent_path());
  std::ofstream out(csv, std::ios::trunc);
  out << "name,accuracy\n";
  for (const auto& [model, status] : expected) out << model << "," << status_name(status) << "\n";
  if (!out.flush()) throw Error(fmt::format("{}: cannot write", csv.string()));
}

}  // namespace crucible::reports
