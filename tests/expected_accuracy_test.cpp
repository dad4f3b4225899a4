// The expected-accuracy gate's rules on their own: each verdict, the flaky rule, and the CSV
// files with their errors (the command end to end is history_test's).
#include "crucible/reports/expected_accuracy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "crucible/core/error.h"

namespace crucible::reports {
namespace {

namespace fs = std::filesystem;

TEST(ExpectedAccuracy, EachVerdictAndWhichFailTheGate) {
  const auto judge = [](Status got, std::optional<Status> want, int flips = 0) {
    return judge_expected(got, want, flips, 2);
  };
  EXPECT_EQ(judge(Status::kPass, Status::kPass), ExpectedVerdict::kPass);
  EXPECT_EQ(judge(Status::kFailAccuracy, Status::kFailAccuracy), ExpectedVerdict::kXfail);
  EXPECT_EQ(judge(Status::kPass, Status::kFailAccuracy), ExpectedVerdict::kImproved);
  EXPECT_EQ(judge(Status::kCrash, Status::kPass), ExpectedVerdict::kFail);
  // Another failure than the expected one is a failure too, not an expected one.
  EXPECT_EQ(judge(Status::kCrash, Status::kFailAccuracy), ExpectedVerdict::kFail);
  EXPECT_EQ(judge(Status::kPass, std::nullopt), ExpectedVerdict::kNew);
  EXPECT_EQ(judge(Status::kCrash, Status::kPass, 2), ExpectedVerdict::kFlaky);
  EXPECT_EQ(judge(Status::kCrash, Status::kPass, 1), ExpectedVerdict::kFail);
  for (auto v : {ExpectedVerdict::kFail, ExpectedVerdict::kImproved, ExpectedVerdict::kNew})
    EXPECT_TRUE(fails_gate(v)) << verdict_name(v);
  for (auto v : {ExpectedVerdict::kPass, ExpectedVerdict::kXfail, ExpectedVerdict::kFlaky})
    EXPECT_FALSE(fails_gate(v)) << verdict_name(v);
}

TEST(ExpectedAccuracy, FlipsCountPassToNotPassChangesOnly) {
  EXPECT_EQ(status_flips({}), 0);
  EXPECT_EQ(status_flips({Status::kPass, Status::kPass}), 0);
  // fail_accuracy -> crash is no flip: neither passes.
  EXPECT_EQ(status_flips({Status::kFailAccuracy, Status::kCrash}), 0);
  EXPECT_EQ(status_flips({Status::kPass, Status::kCrash, Status::kPass, Status::kPass}), 2);
}

TEST(ExpectedAccuracy, CsvRoundTripsAndBadLinesNameFileAndLine) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_expected_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path csv = dir / "suite" / "codegen.csv";
  EXPECT_TRUE(read_expected_csv(csv).empty());  // no file: every model is new
  write_expected_csv(csv, {{"a", Status::kPass}, {"b", Status::kFailAccuracy}});
  const auto back = read_expected_csv(csv);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("b"), Status::kFailAccuracy);
  std::ofstream(csv, std::ios::app) << "c,fail_sideways\n";
  try {
    read_expected_csv(csv);
    FAIL() << "an unknown status was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("codegen.csv:4: 'fail_sideways' is not a status"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(csv, std::ios::trunc) << "model,status\n";
  EXPECT_THROW(read_expected_csv(csv), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible::reports
