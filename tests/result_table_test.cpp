// The end-of-run console output: failure reasons under their rows and the per-suite geometric-mean
// speed-up lines.
#include "result_table.h"

#include <gtest/gtest.h>

#include "crucible/reports/error_summary.h"

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
            "geomean speedup of codegen over crucible eager, suite mlp: 0.50x over 1 of 1 models, "
            "pass rate 1/1 (100%)\n"
            "geomean speedup of codegen over crucible eager, suite vision: 4.00x over 2 of 3 "
            "models, pass rate 2/3 (67%)\n"
            "geomean speedup of codegen over crucible eager, all suites: 2.00x over 3 of 4 models, "
            "pass rate 3/4 (75%)\n");
}

// A backend that fails 4 of 5 models is not summed up by its one pass, and a noisy timing is no
// speed-up to average: each line says what it covers.
TEST(SpeedupSummary, FailedAndNoisyModelsAreCountedNotAveraged) {
  std::vector<reports::ResultRecord> rs = {perf("s", "ok", "fast", reports::Status::kPass, 37.08)};
  for (const std::string m : {"a", "b", "c", "d"})
    rs.push_back(perf("s", m, "fast", reports::Status::kFailAccuracy, {}));
  auto noisy = perf("s", "n", "fast", reports::Status::kPass, 68.0);
  noisy.noisy = true;
  rs.push_back(noisy);
  EXPECT_EQ(format_speedup_summary(rs),
            "geomean speedup of fast over crucible eager, suite s: 37.08x over 1 of 6 models, "
            "pass rate 2/6 (33%), 1 noisy left out\n");
  rs.erase(rs.begin());
  EXPECT_EQ(format_speedup_summary(rs),
            "geomean speedup of fast over crucible eager, suite s: - over 0 of 5 models, pass "
            "rate 1/5 (20%), 1 noisy left out\n");
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
            "geomean speedup of codegen over crucible eager, suite vision: 4.90x over 2 of 2 "
            "models, pass rate 2/2 (100%)\n"
            "geomean speedup of libtorch over crucible eager, suite vision: 1.50x over 1 of 2 "
            "models, pass rate 1/2 (50%)\n"
            "geomean speedup of codegen over libtorch (PyTorch eager), suite vision: 2.00x over 1 "
            "of 2 models, pass rate 2/2 (100%)\n");
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

// Under a failure, its reason in one line: what failed, and the compiler's first error with
// long paths cut to file names; all of it, indented, with --verbose. A pass has no line.
TEST(ResultTable, ReasonUnderEachFailure) {
  auto fail = reports::make_result("tutorial", "m", "codegen", "accuracy", 1);
  fail.status = reports::Status::kFailToCompile;
  fail.error =
      "c++ failed on /root/.cache/crucible/kernels/0123456789abcdef/tu0.cpp:\n"
      "/root/.cache/crucible/kernels/0123456789abcdef/tu0.cpp: In function 'void k()':\n"
      "/root/.cache/crucible/kernels/0123456789abcdef/tu0.cpp:296:48: error: no match\n"
      "  296 |   auto t3 = f(t0, t2);\n";
  auto pass = reports::make_result("tutorial", "p", "codegen", "accuracy", 1);
  pass.status = reports::Status::kPass;
  const std::string table = format_result_table({fail, pass});
  EXPECT_NE(table.find("\n    c++ failed on .../tu0.cpp: line 296:48: error: no match\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(format_reason(pass, false), "");
  const std::string all = format_reason(fail, true);
  EXPECT_NE(all.find("    /root/.cache/crucible/kernels/0123456789abcdef/tu0.cpp:296:48: error"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("    296 |   auto t3"), std::string::npos) << all;
}

TEST(ErrorSummary, OneLineCutToItsWidthWithControlsEscaped) {
  EXPECT_EQ(reports::error_summary("", 40), "");
  EXPECT_EQ(reports::error_summary("SIGSEGV during run", 40), "SIGSEGV during run");
  // More lines without a diagnosis: the first, marked as cut.
  EXPECT_EQ(reports::error_summary("first\nsecond", 40), "first ...");
  const std::string cut = reports::error_summary(std::string(100, 'x'), 40);
  EXPECT_EQ(cut.size(), 40u);
  EXPECT_EQ(cut.substr(36), " ...");
  EXPECT_EQ(reports::error_summary("bell\a here", 40), "bell\\x07 here");
  // A trailing newline is no more text; a cut never splits a UTF-8 sequence or an escape.
  EXPECT_EQ(reports::error_summary("boom\n", 40), "boom");
  EXPECT_EQ(reports::error_summary(std::string(35, 'a') + "\u2018x\u2019 and more", 40),
            std::string(35, 'a') + " ...");
  EXPECT_EQ(reports::error_summary(std::string(34, 'a') + "\x1b and more text", 40),
            std::string(34, 'a') + " ...");
  // A path of the error keeps its quote and loses its folders.
  EXPECT_EQ(reports::error_summary("cannot open '/very/long/folder/of/a/kernel/cache/x.so'", 80),
            "cannot open '.../x.so'");
}

}  // namespace
}  // namespace crucible
