// No option is guessed or ignored: an abbreviated flag is an unknown one on every command, and
// calibrate refuses the run options it sets itself instead of overwriting them in silence.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli_util.h"

namespace crucible {
namespace {

TEST(CliOptions, NoOptionIsGuessedOrIgnored) {
  struct Case {
    std::string args, expected;
  } cases[] = {
      {"run --suite tutorial --back eager --dry-run", "unrecognised option '--back'"},
      {"run --suite tutorial --mod performance --dry-run", "unrecognised option '--mod'"},
      {"regressions --all --ref eager", "unrecognised option '--ref'"},
      {"compare 1 2 --wid", "unrecognised option '--wid'"},
      {"run-graph --thr 2 x.graph", "unrecognised option '--thr'"},
      {"calibrate --suite tutorial --backends codegen --runs 2",
       "--backends is not an option of calibrate (it sets that itself)"},
      {"calibrate --suite tutorial --mode both --runs 2",
       "--mode is not an option of calibrate (it sets that itself)"},
  };
  for (const auto& c : cases) {
    const auto r = testing::run_crucible(c.args + " --db /nonexistent/never.db");
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.args << ": " << r.err;
  }
  // The full names still work.
  EXPECT_EQ(testing::run_crucible("run --suite tutorial --backends eager --dry-run").status, 0);
}

}  // namespace
}  // namespace crucible
