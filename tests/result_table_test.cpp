// The end-of-run console output: the per-suite geometric-mean speed-up lines.
#include "result_table.h"

#include <gtest/gtest.h>

namespace crucible {
namespace {

reports::ResultRecord perf(const std::string& suite, const std::string& model,
                           const std::string& backend, reports::Status status,
                           std::optional<double> speedup) {
  auto r = reports::make_result(suite, model, backend, "performance", 1);
  r.status = status;
  r.speedup = speedup;
  return r;
}

TEST(SpeedupSummary, GeomeanPerSuiteAndOverall) {
  const std::vector<reports::ResultRecord> rs = {
      perf("vision", "a", "eager", reports::Status::kPass, 1.0),
      perf("vision", "a", "codegen", reports::Status::kPass, 2.0),
      perf("vision", "b", "codegen", reports::Status::kPass, 8.0),      // geomean(2, 8) = 4
      perf("vision", "c", "codegen", reports::Status::kFailToRun, {}),  // not counted
      perf("mlp", "d", "codegen", reports::Status::kPass, 0.5),
  };
  EXPECT_EQ(format_speedup_summary(rs),
            "geomean speedup of codegen over crucible eager, suite mlp: 0.50x (1 models)\n"
            "geomean speedup of codegen over crucible eager, suite vision: 4.00x (2 models)\n"
            "geomean speedup of codegen over crucible eager, all suites: 2.00x (3 models)\n");
}

// With the peer in the run every backend is also read against it, each line naming its baseline,
// and the table gets the column.
TEST(SpeedupSummary, OverThePeerTooWhenTheRunHasIt) {
  const std::vector<reports::ResultRecord> rs = {
      perf("vision", "a", "eager", reports::Status::kPass, 1.0),
      perf("vision", "a", "codegen", reports::Status::kPass, 3.0),
      perf("vision", "a", "libtorch", reports::Status::kPass, 1.5),  // codegen 2x over it
      perf("vision", "b", "codegen", reports::Status::kPass, 8.0),
      perf("vision", "b", "libtorch", reports::Status::kFailToRun, {}),  // no peer figure for b
  };
  EXPECT_EQ(format_speedup_summary(rs),
            "geomean speedup of codegen over crucible eager, suite vision: 4.90x (2 models)\n"
            "geomean speedup of libtorch over crucible eager, suite vision: 1.50x (1 models)\n"
            "geomean speedup of codegen over libtorch (PyTorch eager), suite vision: 2.00x (1 "
            "models)\n");
  const std::string table = format_result_table(rs);
  EXPECT_NE(table.find("vs libtorch"), std::string::npos) << table;
  EXPECT_NE(table.find("3.00x       2.00x"), std::string::npos) << table;
  EXPECT_EQ(format_result_table({rs[0], rs[1]}).find("vs libtorch"), std::string::npos);
}

TEST(SpeedupSummary, EmptyWithoutPerformanceResults) {
  auto acc = reports::make_result("vision", "a", "codegen", "accuracy", 1);
  acc.status = reports::Status::kPass;
  EXPECT_EQ(
      format_speedup_summary({acc, perf("vision", "a", "eager", reports::Status::kPass, 1.0)}), "");
}

}  // namespace
}  // namespace crucible
