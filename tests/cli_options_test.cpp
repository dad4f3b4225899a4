// No option is guessed or ignored: an abbreviated flag is an unknown one on every command,
// calibrate refuses the run options it sets itself, and an option nothing in the run would take
// is refused. Unknown names say what exists; --version, help CMD, and list backends' warnings.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "cli_util.h"
#include "crucible/plugin_api.h"

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
      // Options of a mode the run does not have, or that nothing in it would take.
      {"run --suite tutorial --repeat 3", "--repeat applies to timing: give --mode performance"},
      {"run --suite tutorial --no-audit", "--no-audit applies to timing"},
      {"run --suite tutorial --processes 2 --mode accuracy", "--processes applies to timing"},
      {"run --graph x.graph --variant small", "--variant applies to built-in models"},
      {"run --graph x.graph --batch-size 4", "--batch-size applies to built-in models"},
      {"run --suite tutorial -c fusion=off", "reaches every backend but eager, and this run has"},
      {"run --suite tutorial --backends codegen -c libtorch:mode=jit",
       "backend 'libtorch' is not in this run's --backends"},
      {"calibrate --suite tutorial --runs 2 --backend codegen -c eagre:x=1",
       "backend 'eagre' is not in this run's --backends"},
  };
  for (const auto& c : cases) {
    const auto r = testing::run_crucible(c.args + " --db /nonexistent/never.db");
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.args << ": " << r.err;
  }
  // The full names still work.
  EXPECT_EQ(testing::run_crucible("run --suite tutorial --backends eager --dry-run").status, 0);
  EXPECT_EQ(testing::run_crucible("run --suite tutorial --backends eager --mode performance "
                                  "--repeat 3 --dry-run")
                .status,
            0);
}

// A mistyped name gets the nearest one that exists and the list of them.
TEST(CliOptions, UnknownNamesSayWhatExists) {
  struct Case {
    std::string args, expected;
  } cases[] = {
      {"rnu --suite tutorial", "unknown command 'rnu'; did you mean 'run'?"},
      {"run --suite tutorail", "did you mean 'tutorial'? known: "},
      {"run --suite tutorial --backends codgen", "did you mean 'codegen'? known: codegen, eager"},
      {"run --suite tutorial --only sin_coss", "did you mean 'sin_cos'? known: "},
      {"run --suite nothing_like_it", "known: "},
  };
  for (const auto& c : cases) {
    const auto r = testing::run_crucible(c.args + " --db /nonexistent/never.db");
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_EQ(testing::run_crucible("run --suite nothing_like_it").err.find("did you mean"),
            std::string::npos);
}

TEST(CliOptions, VersionAndHelpForACommand) {
  auto v = testing::run_crucible("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("crucible 0.", 0), 0u) << v.out;
  EXPECT_NE(v.out.find("plugin ABI " + std::to_string(plugin::kAbiVersion) + "\n"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("-march="), std::string::npos) << v.out;
  // The commit its runs record, read from the source tree it was built from (a checkout here).
  const std::string head =
      testing::run_command("git -C " + std::string(CRUCIBLE_SOURCE_DIR) + " rev-parse HEAD").out;
  if (!head.empty()) {
    EXPECT_NE(v.out.find("commit " + head.substr(0, 40)), std::string::npos) << v.out;
  }
  auto help = testing::run_crucible("help run");
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_EQ(help.out.rfind("usage: crucible run ", 0), 0u) << help.out;
  // Every command's summary starts in one column, and `db` names each of its actions.
  auto all = testing::run_crucible("help");
  EXPECT_EQ(all.status, 0);
  size_t column = 0;
  int listed = 0;
  std::istringstream lines(all.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    const size_t name_end = line.find(' ', 2);
    const size_t summary = line.find_first_not_of(' ', name_end);
    if (column == 0) column = summary;
    EXPECT_EQ(summary, column) << line;
    ++listed;
  }
  EXPECT_GT(listed, 20);
  for (const char* action : {"merge", "check", "migrate"})
    EXPECT_NE(all.out.find(action), std::string::npos) << action << " in\n" << all.out;
  EXPECT_EQ(testing::run_crucible("help nosuch").status, 2);
  // minify's --memory-limit says what it limits, as run's does.
  auto minify = testing::run_crucible("minify --help");
  EXPECT_NE(minify.out.find("resident memory"), std::string::npos) << minify.out;
  EXPECT_EQ(testing::run_crucible("minify x.graph --backend eager --memory-limit 3").status, 2);
  // The nightly's help is asked for, so it goes to stdout with exit 0; a bad flag is exit 2.
  auto nightly =
      testing::run_command("bash " + std::string(CRUCIBLE_SOURCE_DIR) + "/ci/nightly --help");
  EXPECT_EQ(nightly.status, 0);
  EXPECT_NE(nightly.out.find("usage: ci/nightly"), std::string::npos) << nightly.out;
  EXPECT_EQ(nightly.err, "");
  EXPECT_EQ(testing::run_command("bash " + std::string(CRUCIBLE_SOURCE_DIR) + "/ci/nightly --bogus")
                .status,
            2);
  // A mode the nightly does not run is refused before anything is built.
  auto mode = testing::run_command("bash " + std::string(CRUCIBLE_SOURCE_DIR) +
                                   "/ci/nightly --mode training --no-build");
  EXPECT_EQ(mode.status, 2);
  EXPECT_NE(mode.err.find("--mode must be both or all, got 'training'"), std::string::npos)
      << mode.err;
}

// The user guide documents every option `crucible run` takes: the options are one table in the
// code (run_option_table, timing_options), and --help is made from it, so this reads --help.
TEST(CliOptions, EveryRunOptionIsInTheUserGuide) {
  std::string guide;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(CRUCIBLE_SOURCE_DIR) + "/docs/guide")) {
    guide += testing::read_all(e.path());
  }
  const auto help = testing::run_crucible("run --help");
  ASSERT_EQ(help.status, 0);
  std::istringstream lines(help.out);
  int options = 0;
  for (std::string line; std::getline(lines, line);) {
    // "  --repeat arg (=10)" or "  -c [ --config ] arg"
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("^  (-([a-z]) \\[ )?--([a-z0-9-]+)"))) continue;
    ++options;
    const bool documented = guide.find("--" + m[3].str()) != std::string::npos ||
                            (m[2].matched && guide.find("`-" + m[2].str()) != std::string::npos);
    EXPECT_TRUE(documented) << "--" << m[3] << " is not in docs/guide/";
  }
  EXPECT_GE(options, 35);
}

// Two plugin files that report one name: both listed under the name --backends loads them by,
// the other's reported name beside it, and a warning.
TEST(CliOptions, ListBackendsWarnsOfTwoFilesWithOneName) {
  const auto dir = testing::fresh_test_dir("crucible_list");
  std::filesystem::copy_file(
      std::string(CRUCIBLE_BIN_DIR) + "/../lib/crucible/crucible_backend_eager.so",
      dir / "crucible_backend_eager2.so");
  auto r = testing::run_crucible("list backends --plugin-path " + dir.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("eager2 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(reports itself as 'eager')"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("warning: 2 plugins report the name 'eager'"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crucible
