// Runs the real crucible binary from a test and captures its exit status, stdout and stderr, and
// splits the CSV it prints.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace crucible::testing {

struct CliResult {
  int status = -1;  // exit status; 128+signal when killed
  std::string out;
  std::string err;
};

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs shell command `cmd` with no input, capturing its exit status and both outputs.
inline CliResult run_command(const std::string& cmd) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path() /
             ("crucible_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  const std::string full =
      cmd + " >" + (dir / "out").string() + " 2>" + (dir / "err").string() + " </dev/null";
  int raw = std::system(full.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = read_all(dir / "out");
  r.err = read_all(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

// `args` is appended to the binary's path as shell text (quote paths with spaces yourself).
inline CliResult run_crucible(const std::string& args, const std::string& env = "") {
  return run_command(env + " " + std::string(CRUCIBLE_BIN_DIR) + "/crucible " + args);
}

// Removes the directories fresh_test_dir made for a test when it ends without failing; a failed
// test's stay for whoever reads its log. Installed by the first fresh_test_dir of a process.
class RemoveTestDirsUnlessFailed : public ::testing::EmptyTestEventListener {
 public:
  static std::vector<std::filesystem::path>& pending() {
    static std::vector<std::filesystem::path> dirs;
    return dirs;
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) {
      std::error_code ignored;
      for (const auto& dir : pending()) std::filesystem::remove_all(dir, ignored);
    }
    pending().clear();
  }
};

// An empty directory of its own for the running test, <tmp>/<prefix>_<pid>_<test name> (a
// parameterized name's '/' becomes '_'), removed when the test ends unless it failed.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  static const bool installed = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveTestDirsUnlessFailed);
    return true;
  }();
  (void)installed;
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '_');
  const auto dir = std::filesystem::temp_directory_path() /
                   (prefix + "_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RemoveTestDirsUnlessFailed::pending().push_back(dir);
  return dir;
}

// What the sqlite3 shell prints for `sql` on the database `db` ("a|b" rows, one per line).
inline std::string query_text(const std::filesystem::path& db, const std::string& sql) {
  static int counter = 0;
  const auto out =
      std::filesystem::temp_directory_path() /
      ("crucible_query_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = "sqlite3 " + db.string() + " \"" + sql + "\" > " + out.string();
  if (std::system(cmd.c_str()) != 0) return "(sqlite3 failed: " + cmd + ")";
  std::string text = read_all(out);
  std::filesystem::remove(out);
  return text;
}

// Passing performance results in `db` (of backend `backend`, or all for "") without a speed-up
// whose timing, or eager's beside it in that run, does not say "no speed-up" (as a clock gap that
// steal on a VM makes in most samples, or a stop from outside, withholds it): "0\n" when every
// result has one or the reason there is none.
inline std::string unexplained_missing_speedups(const std::filesystem::path& db,
                                                const std::string& backend = "") {
  return query_text(
      db,
      "SELECT count(*) FROM results r WHERE r.mode = 'performance' AND r.status = 'pass' AND "
      "r.speedup IS NULL AND "
      "COALESCE(r.noise_reason, '') NOT LIKE '%no speed-up%' AND NOT EXISTS (SELECT 1 FROM "
      "results e WHERE e.run_id = r.run_id AND e.model = r.model AND e.backend = 'eager' AND "
      "e.mode = r.mode AND e.noise_reason LIKE '%no speed-up%')" +
          (backend.empty() ? std::string() : " AND r.backend = '" + backend + "'"));
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Splits one CSV line (RFC 4180 quotes) into fields.
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace crucible::testing
