// The store's read side and shard merge, through the real CLI on real SQLite files: runs,
// history, kernels and query in every format, writes refused, merge idempotent and lossless, and
// one-line errors (missing file, foreign file, newer schema, unknown run or result) that leave the
// database untouched.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "crucible/reports/store.h"
#include "synthetic_history.h"

namespace crucible::reports {
namespace {

namespace fs = std::filesystem;
using testing::csv_fields;
using testing::run_crucible;

// One nightly run of two models on eager and codegen, with kernel timings on codegen.
int64_t add_run(Store& s, const std::string& tag, double codegen_ms, Status mlp_status) {
  RunInfo info;
  info.tag = tag;
  info.suites = "small";
  info.backends = "eager,codegen";
  info.mode = "both";
  info.env.cores = 2;
  const int64_t run = s.begin_run(info);
  for (const std::string model : {"mlp", "sin_cos"}) {
    for (const std::string backend : {"eager", "codegen"}) {
      ResultRecord r = make_result("small", model, backend, "performance", 4);
      r.status = Status::kPass;
      r.backend_version = "0.1.0";
      r.samples_ms = backend == "eager" ? std::vector<double>{2.0, 2.1, 1.9}
                                        : std::vector<double>{codegen_ms, codegen_ms};
      if (backend == "codegen") {
        r.speedup = 2.0 / codegen_ms;
        // The GEMM at 100 GFLOP/s and 5 GB/s, against ceilings of 200 and 20: half its roofline.
        r.kernels = {{"cpp_fused_add_0", 10, 4000}, {"extern::gemm", 10, 12000}};
        r.kernels[1].flops = 100.0 * 12000;
        r.kernels[1].bytes = 5.0 * 12000;
        r.roofline = reports::Roofline{1e9, 1e6, 200, 20, {}, {}, {}};
      }
      s.add_result(run, r);
      ResultRecord a = make_result("small", model, backend, "accuracy", 4);
      a.status = model == "mlp" && backend == "codegen" ? mlp_status : Status::kPass;
      a.backend_version = "0.1.0";
      // What exporters must escape: markup, quotes and a control byte XML cannot hold.
      if (a.status != Status::kPass) a.error = "output %y<0> & 'max' \"err\" \x01 off";
      s.add_result(run, a);
    }
  }
  s.finish_run(run, "complete");
  return run;
}

class History : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crucible_history_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = dir_ / "h.db";
    auto s = Store::open(db_);
    add_run(*s, "night1", 1.0, Status::kPass);
    add_run(*s, "night2", 1.25, Status::kFailAccuracy);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string db() const { return " --db " + db_.string(); }
  std::string bytes(const fs::path& p) const { return testing::read_all(p); }
  fs::path dir_, db_;
};

TEST_F(History, RunsAndHistoryInEveryFormat) {
  auto r = run_crucible("runs" + db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("night2"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("night2"), r.out.find("night1"));  // newest first

  r = run_crucible("history --model sin_cos --backend codegen --format csv" + db());
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(header.rfind("run,started_at,git_commit,suite,status,speedup,median_ms,cv_pct", 0), 0u)
      << header;
  EXPECT_NE(first.find(",pass,2,1,"), std::string::npos) << first;  // oldest first: 2x, 1 ms
  EXPECT_NE(second.find(",pass,1.6,1.25,"), std::string::npos) << second;

  r = run_crucible("history --model mlp --backend codegen --metric accuracy --format json" + db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"status\": \"pass\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"status\": \"fail_accuracy\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"backend_version\": \"0.1.0\""), std::string::npos) << r.out;

  // --since in the future leaves nothing; a bad span is one line, exit 2.
  r = run_crucible("history --model mlp --backend codegen --since 2999-01-01 --format csv" + db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = run_crucible("history --model mlp --backend codegen --since yesterday" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--since 'yesterday'"), std::string::npos) << r.err;
  r = run_crucible("history --model nope --backend codegen" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no result for model 'nope'"), std::string::npos) << r.err;
  r = run_crucible("history --model mlp --backend codegen --metric joules" + db());
  EXPECT_EQ(r.status, 2);
  r = run_crucible("runs --format yaml" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--format must be table, csv or json"), std::string::npos) << r.err;
}

TEST_F(History, KernelsByResultOrNewestProfiledResult) {
  auto r = run_crucible("kernels --model mlp --backend codegen --format csv" + db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "kernel,calls,total_ms,per_call_us,share_pct,sim_instructions_per_call,gflops,gbs,"
            "roofline_pct,bound");
  // Slowest first, with its share, not counted under Valgrind, and beside its roofline (the
  // run's ceilings); a kernel whose backend gave no cost has no roofline figures.
  EXPECT_LT(r.out.find("extern::gemm,10,0.012,1.2,75,,100,5,50,compute\n"),
            r.out.find("cpp_fused_add_0,10,0.004,0.4,25,,,,,\n"))
      << r.out;
  // The model as run tables print it, with its suite, finds the same result.
  EXPECT_EQ(run_crucible("kernels --model small/mlp --backend codegen --format csv" + db()).out,
            r.out);
  r = run_crucible("kernels 999999" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no result with id 999999"), std::string::npos) << r.err;
  r = run_crucible("kernels --model mlp --backend eager" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("has kernel timings"), std::string::npos) << r.err;
}

// The memory level of a kernel's roofline: ceilings of 200 GFLOP/s, 800 GB/s from L1 caches
// holding 5 kB in all, 400 GB/s from L2 caches holding 30 kB, 100 GB/s from an L3 of 100 kB and
// 20 GB/s from DRAM. Each kernel's bytes per call are held to the smallest level they fit:
// 4 kB at 40 GB/s is 5% of L1's, 20 kB at 50 GB/s 12.5% of L2's, 32 kB at 16 GB/s 16% of L3's,
// 200 kB at 10 GB/s 50% of DRAM's; a GEMM stays compute-bound.
TEST_F(History, KernelsStandBesideTheBandwidthOfTheLevelTheirBytesFit) {
  int64_t id = 0;
  {
    auto s = Store::open(db_);
    const int64_t run = s->begin_run(make_run_info("small", "codegen", "performance"));
    ResultRecord r = make_result("small", "cached", "codegen", "performance", 4);
    r.status = Status::kPass;
    r.samples_ms = {1.0, 1.0};
    r.kernels = {{"cpp_fused_mul_0", 10, 4000},
                 {"cpp_fused_copy_1", 10, 20000},
                 {"extern::gemm", 10, 12000},
                 {"cpp_fused_tiny_2", 10, 1000},
                 {"cpp_fused_big_3", 10, 200000}};
    r.kernels[0].flops = 4000;
    r.kernels[0].bytes = 200000;
    r.kernels[1].flops = 0;
    r.kernels[1].bytes = 320000;
    r.kernels[2].flops = 100.0 * 12000;
    r.kernels[2].bytes = 5.0 * 12000;
    r.kernels[3].flops = 0;
    r.kernels[3].bytes = 40000;
    r.kernels[4].flops = 0;
    r.kernels[4].bytes = 2000000;
    r.roofline = reports::Roofline{1e9, 1e6, 200, 20, {800, 5000}, {400, 30000}, {100, 100000}};
    s->add_result(run, r);
    s->finish_run(run, "complete");
    id = *s->latest_profiled_result("cached", "codegen");
  }
  auto r = run_crucible(fmt::format("kernels {} --format csv", id) + db());
  ASSERT_EQ(r.status, 0) << r.err;
  // Each kernel's line from its GFLOP/s on: GFLOP/s, GB/s, percent of its bound, the bound.
  auto tail = [&](const std::string& name) {
    const size_t at = r.out.find(name + ",");
    if (at == std::string::npos) return std::string();
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    size_t from = line.size();
    for (int commas = 0; commas < 4 && from != std::string::npos; ++commas)
      from = line.rfind(',', from - 1);
    return from == std::string::npos ? line : line.substr(from + 1);
  };
  EXPECT_EQ(tail("cpp_fused_tiny_2"), "0,40,5,L1") << r.out;
  EXPECT_EQ(tail("cpp_fused_mul_0"), "1,50,12.5,L2") << r.out;
  EXPECT_EQ(tail("cpp_fused_copy_1"), "0,16,16,L3") << r.out;
  EXPECT_EQ(tail("cpp_fused_big_3"), "0,10,50,DRAM") << r.out;
  EXPECT_EQ(tail("extern::gemm"), "100,5,50,compute") << r.out;
}

TEST_F(History, QueryReadsAndRefusesEveryWrite) {
  auto r = run_crucible(
      "query \"SELECT backend, count(*) AS n FROM results GROUP BY backend ORDER BY backend\" "
      "--format csv" +
      db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "backend,n\ncodegen,8\neager,8\n");
  const std::string before = bytes(db_);
  for (const char* sql :
       {"DELETE FROM results", "UPDATE runs SET tag = 'x'", "DROP TABLE runs",
        "INSERT INTO runs (id) VALUES (99)", "CREATE TABLE t (x)", "PRAGMA user_version = 3",
        "SELECT 1; DELETE FROM results", "ATTACH DATABASE '/tmp/x.db' AS x"}) {
    r = run_crucible(std::string("query \"") + sql + "\"" + db());
    EXPECT_EQ(r.status, 2) << sql << ": " << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(bytes(db_), before);  // untouched
  EXPECT_EQ(Store::open_readonly(db_)->query("SELECT count(*) FROM results").rows[0][0],
            Cell{int64_t{16}});
  r = run_crucible("query \"SELECT nope FROM results\"" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no such column: nope"), std::string::npos) << r.err;
}

TEST_F(History, BadDatabasesAreOneLineAndLeftUntouched) {
  // Missing: not created.
  auto r = run_crucible("runs --db " + (dir_ / "none.db").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no such database"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));
  // Not SQLite.
  std::ofstream(dir_ / "junk.db") << std::string(4096, 'j');
  r = run_crucible("runs --db " + (dir_ / "junk.db").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a crucible database"), std::string::npos) << r.err;
  EXPECT_EQ(bytes(dir_ / "junk.db"), std::string(4096, 'j'));
  // A crucible database damaged on disk: cut off mid-file, or every page after the schema's
  // overwritten. Every command that reads it says so in one line, and leaves the file as it was.
  const std::string good = bytes(db_);
  ASSERT_GT(good.size(), 4 * 4096u);
  std::string overwritten = good;
  std::fill(overwritten.begin() + 4096, overwritten.end(), '\xff');
  for (const auto& [name, damaged] : {std::pair{"truncated.db", good.substr(0, good.size() / 2)},
                                      std::pair{"overwritten.db", overwritten}}) {
    const fs::path f = dir_ / name;
    std::ofstream(f, std::ios::binary) << damaged;
    const std::string on = " --db " + f.string();
    for (const std::string& cmd :
         {"runs" + on, "history --model sin_cos --backend codegen --metric speedup" + on,
          "regressions --all" + on, "compare 1 2" + on,
          "query \"SELECT count(*) FROM results\"" + on, "export-results 1 --format junit" + on,
          "check-expected 1" + on, "report --html " + (dir_ / "site").string() + on,
          "db merge " + (dir_ / "merged.db").string() + " " + f.string()}) {
      r = run_crucible(cmd);
      EXPECT_EQ(r.status, 2) << name << ": " << cmd << "\n" << r.out;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find("malformed"), std::string::npos) << cmd << "\n" << r.err;
    }
    EXPECT_EQ(bytes(f), damaged) << name;
    EXPECT_FALSE(fs::exists(dir_ / "merged.db"));
    EXPECT_FALSE(fs::exists(dir_ / "site"));
  }
  // A newer schema: refused by every reader and by merge, the file unchanged.
  ASSERT_EQ(
      std::system(
          ("sqlite3 " + db_.string() + " \"UPDATE schema_version SET version = 99\"").c_str()),
      0);
  const std::string before = bytes(db_);
  for (const std::string& cmd : {"runs" + db(), "query \"SELECT 1\"" + db(),
                                 "db merge " + (dir_ / "out.db").string() + " " + db_.string()}) {
    r = run_crucible(cmd);
    EXPECT_EQ(r.status, 2) << cmd;
    EXPECT_NE(r.err.find("schema version 99 is newer"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(bytes(db_), before);
  EXPECT_FALSE(fs::exists(dir_ / "out.db"));
}

// A nightly run with jittered samples (10 per result): sin_cos on codegen at `codegen_ms`, its
// kernel cpp_fused_sin_0 taking what codegen_ms adds, on CPU `cpu`.
int64_t add_nightly(Store& s, int n, double codegen_ms, Status mlp, const std::string& cpu) {
  RunInfo info;
  info.tag = "n" + std::to_string(n);
  info.suites = "small";
  info.backends = "eager,codegen";
  info.mode = "both";
  info.env.cpu_model = cpu;
  info.env.cores = 2;
  const int64_t run = s.begin_run(info);
  for (const std::string model : {"mlp", "sin_cos"}) {
    for (const std::string backend : {"eager", "codegen"}) {
      const double level = backend == "eager" ? 2.0 : model == "sin_cos" ? codegen_ms : 1.0;
      ResultRecord r = make_result("small", model, backend, "performance", 4);
      r.status = Status::kPass;
      const bool failed = model == "mlp" && backend == "codegen" && mlp != Status::kPass;
      if (failed) {  // as a run does: a backend that failed accuracy is not timed
        r.status = Status::kSkipped;
        r.error = "did not pass accuracy";
      }
      for (int i = 0; i < (failed ? 0 : 10); ++i)
        r.samples_ms.push_back(level * (1 + 0.002 * ((i * 7 + n * 3) % 5 - 2)));
      if (backend == "codegen") {
        r.speedup = 2.0 / level;
        r.kernels = {{"cpp_fused_sin_0", 10, static_cast<int64_t>(10 * 1e6 * (level - 0.5))},
                     {"extern::gemm", 10, 5000000}};
      }
      s.add_result(run, r);
      ResultRecord a = make_result("small", model, backend, "accuracy", 4);
      a.status = model == "mlp" && backend == "codegen" ? mlp : Status::kPass;
      s.add_result(run, a);
    }
  }
  s.finish_run(run, "complete");
  return run;
}

// Runs /usr/bin/python3 with `code` (Debian's Python: compare.py and its scipy live there).
testing::CliResult python(const std::string& code, const std::string& args = "") {
  return testing::run_command("/usr/bin/python3 -c '" + code + "' " + args);
}

TEST_F(History, ExportsReadByTheirTools) {
  const fs::path a = dir_ / "a.json", b = dir_ / "b.json";
  ASSERT_EQ(run_crucible("export-results 1 --format gbench-json -o " + a.string() + db()).status,
            0);
  ASSERT_EQ(run_crucible("export-results 2 --format gbench-json -o " + b.string() + db()).status,
            0);
  // Google Benchmark's own compare.py (Debian's libbenchmark-tools) reads both and compares.
  auto r = testing::run_command("/usr/bin/python3 /usr/share/benchmark/compare.py benchmarks " +
                                a.string() + " " + b.string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("small/sin_cos/codegen"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("+0.2500"), std::string::npos) << r.out;  // 1 ms -> 1.25 ms

  const fs::path junit = dir_ / "junit.xml";
  ASSERT_EQ(run_crucible("export-results 2 --format junit -o " + junit.string() + db()).status, 0);
  r = python(
      "import sys, xml.etree.ElementTree as E; t = E.parse(sys.argv[1]).getroot(); "
      "print(t.tag, t.get(\"tests\"), t.get(\"failures\"), t.get(\"errors\"), "
      "len(t.findall(\"testsuite\")), len(t.findall(\"testsuite/testcase\")), "
      "t.find(\"testsuite/testcase/failure\").get(\"message\"), "
      "t.find(\"testsuite/testcase/failure\").text)",
      junit.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "testsuites 8 1 0 2 8 fail_accuracy output %y<0> & 'max' \"err\" \\x01 off\n");

  const fs::path trace = dir_ / "trace.json";
  ASSERT_EQ(
      run_crucible("export-results 1 --format chrome-trace -o " + trace.string() + db()).status, 0);
  r = python(
      "import sys, json; e = json.load(open(sys.argv[1]))[\"traceEvents\"]; "
      "x = [v for v in e if v[\"ph\"] == \"X\"]; "
      "print(len(x), len({v[\"pid\"] for v in x}), *sorted({v[\"name\"] for v in x}))",
      trace.string());
  ASSERT_EQ(r.status, 0) << r.err;
  // 2 profiled results x 2 kernels x 10 calls each: one event per kernel call.
  EXPECT_EQ(r.out, "40 2 cpp_fused_add_0 extern::gemm\n");

  // A result that is not the run's is said as such, not as "no kernel timings".
  r = run_crucible("export-results 1 --format chrome-trace --result 999" + db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("run 1 has no result 999 (its results are"), std::string::npos) << r.err;

  r = run_crucible("export-results 1 --format csv -o " + (dir_ / "csv").string() + db());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(testing::read_all(dir_ / "csv" / "codegen_performance.csv").find("cpu,sin_cos,4,2."),
            std::string::npos);

  // Bad requests: one line, exit 2, nothing written.
  for (const std::string bad :
       {"export-results 999 --format junit", "export-results 1 --format yaml",
        "export-results 1 --format junit --result 3",
        "export-results 1 --format junit -o /nonexistent/dir/x.xml"}) {
    r = run_crucible(bad + db());
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists("/nonexistent/dir/x.xml"));
}

TEST_F(History, ExpectedAccuracyGateAndFlakinessFromHistory) {
  const fs::path exp = dir_ / "expected";
  fs::create_directories(exp / "small");
  auto write = [&](const std::string& backend, const std::string& text) {
    std::ofstream(exp / "small" / (backend + ".csv"), std::ios::trunc) << text;
  };
  write("eager", "name,accuracy\nmlp,pass\nsin_cos,pass\n");
  write("codegen", "name,accuracy\nmlp,pass\nsin_cos,pass\n");
  const std::string opt = " --format csv --expected-dir " + exp.string() + db();
  // Run 2: mlp fails on codegen where it was expected to pass.
  auto r = run_crucible("check-expected 2" + opt);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("small,mlp,codegen,pass,fail_accuracy,FAIL,1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("small,sin_cos,codegen,pass,pass,PASS,0"), std::string::npos) << r.out;
  // Expected to fail: XFAIL, and the gate passes; run 1, where it passed: IMPROVED, fails.
  write("codegen", "name,accuracy\nmlp,fail_accuracy\nsin_cos,pass\n");
  r = run_crucible("check-expected 2" + opt);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("small,mlp,codegen,fail_accuracy,fail_accuracy,XFAIL"), std::string::npos);
  r = run_crucible("check-expected 1" + opt);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("small,mlp,codegen,fail_accuracy,pass,IMPROVED"), std::string::npos)
      << r.out;
  // A model missing from the file is NEW (the file is out of date).
  write("codegen", "name,accuracy\nsin_cos,pass\n");
  r = run_crucible("check-expected 2" + opt);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("small,mlp,codegen,,fail_accuracy,NEW"), std::string::npos) << r.out;
  // pass, fail, pass, fail: flaky from the data, whatever the file says.
  {
    auto s = Store::open(db_);
    add_run(*s, "night3", 1.0, Status::kPass);
    add_run(*s, "night4", 1.0, Status::kFailAccuracy);
  }
  r = run_crucible("check-expected 4" + opt);
  EXPECT_NE(r.out.find("small,mlp,codegen,,fail_accuracy,FLAKY,3"), std::string::npos) << r.out;
  // --update writes what the run got.
  r = run_crucible("check-expected 3 --update" + opt);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(testing::read_all(exp / "small" / "codegen.csv"),
            "name,accuracy\nmlp,pass\nsin_cos,pass\n");
  // Bad input: a malformed file, an unknown run.
  write("codegen", "model;status\n");
  r = run_crucible("check-expected 2" + opt);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("codegen.csv:1: header must start with name,accuracy"), std::string::npos)
      << r.err;
  r = run_crucible("check-expected 77" + opt);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no run with id 77"), std::string::npos) << r.err;
}

TEST(ExpectedAccuracy, TheTutorialSuiteMeetsItsCheckedInExpectations) {
  // A real accuracy run of the tutorial suite, judged against suites/tutorial/expected/*.csv.
  const fs::path dir = fs::temp_directory_path() / ("crucible_gate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = " --db " + (dir / "g.db").string();
  auto r = run_crucible("run --suite tutorial --backends eager,codegen --mode accuracy -o " +
                        (dir / "out").string() + db);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_crucible("check-expected 1 --format csv" + db);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 11) << r.out;  // header + 5 x 2
  EXPECT_EQ(r.out.find(",FAIL,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(",NEW,"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Regressions, YearOfSyntheticNightliesThroughTheStoreMeetsTheBars) {
  // The synthetic year of detect_test, written as 365 runs of 60 models x 3 backends into a
  // real store (the environment in each run's compiler), and judged by `crucible regressions`.
  const std::vector<synthetic::Series> all = synthetic::year(20261125);
  const fs::path dir = fs::temp_directory_path() / ("crucible_year_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path db = dir / "year.db";
  const char* backends[] = {"eager", "codegen", "other"};
  {
    auto s = Store::open(db);
    for (int r = 0; r < synthetic::kRuns; ++r) {
      RunInfo info;
      info.suites = "syn";
      info.backends = "eager,codegen,other";
      info.mode = "performance";
      info.env.cores = 2;
      info.env.compiler = all[0].points[r].fingerprint.substr(9);  // "compiler=gcc-12"
      const int64_t run = s->begin_run(info);
      std::vector<ResultRecord> rs;
      for (size_t i = 0; i < all.size(); ++i) {
        ResultRecord x =
            make_result("syn", "m" + std::to_string(i / 3), backends[i % 3], "performance", 1);
        x.status = Status::kPass;
        x.samples_ms = all[i].points[r].samples;
        x.noisy = all[i].points[r].noisy;
        rs.push_back(std::move(x));
      }
      s->add_results(run, rs);
      s->finish_run(run, "complete");
    }
  }
  // Each series alone (no reference): the year's series share no machine, so a ratio would only
  // add the reference's noise; the ratios are tested on real runs (DetectorOnRealRuns).
  auto r = run_crucible("regressions --all --reference '' --format csv --db " + db.string());
  ASSERT_EQ(r.status, 1) << r.err;  // there are regressions
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < all.size(); ++i) {
    index["m" + std::to_string(i / 3) + "/" + backends[i % 3]] = i;
  }
  std::vector<std::vector<Alert>> alerts(all.size());
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  ASSERT_EQ(line.rfind("kind,suite,model,backend,mode,measure,change_pct,threshold_pct,noise_pct,"
                       "p_value,run,confirmed_by,runs,commits,kernels,note",
                       0),
            0u);
  int floors = 0;
  while (std::getline(lines, line)) {
    const auto f = csv_fields(line);
    ASSERT_EQ(f.size(), 16u) << line;
    if (f[0] == "not_judged") continue;  // a statement about the newest run, not an alert
    if (f[0] == "floor") {
      // Each judged series' detection floor at its newest run: at least the 1% floor, and what
      // its noise lets it show.
      ++floors;
      EXPECT_GE(std::stod(f[7]), 1.0 - 1e-9) << line;
      EXPECT_NE(f[15].find("detection floor"), std::string::npos) << line;
      continue;
    }
    Alert a;
    a.kind = f[0];
    if (f[0] == "environment_event") ADD_FAILURE() << "no machine-wide shift was planted: " << line;
    a.run_id = std::stoll(f[10]);
    a.confirmed_by = std::stoll(f[11]);
    a.note = f[15];
    alerts.at(index.at(f[2] + "/" + f[3])).push_back(a);
  }
  EXPECT_GT(floors, static_cast<int>(all.size()) / 2);  // most series are judged at the end
  const synthetic::Score sc = synthetic::score(all, alerts);
  std::printf("through the store: %s\n", sc.str().c_str());
  sc.expect_bars(all.size());
  fs::remove_all(dir);
}

TEST(Regressions, PmuInstructionCountsAreASeriesOfTheirOwn) {
  // Where the CPU counts instructions, each timed call's count is stored beside its time; a 2%
  // step of codegen's count from run 10 is found in that run, as a pmu_instructions change.
  const fs::path dir = testing::fresh_test_dir("crucible_pmu");
  const fs::path db = dir / "p.db";
  {
    auto s = Store::open(db);
    for (int n = 1; n <= 12; ++n) {
      RunInfo info;
      info.suites = "small";
      info.backends = "eager,codegen";
      info.mode = "performance";
      info.env.cores = 2;
      const int64_t run = s->begin_run(info);
      std::vector<ResultRecord> rs;
      for (const char* backend : {"eager", "codegen"}) {
        ResultRecord r = make_result("small", "mlp", backend, "performance", 4);
        r.status = Status::kPass;
        const double base = backend == std::string("eager") ? 2e6 : 1e6;
        for (int k = 0; k < 15; ++k) {
          r.samples_ms.push_back((backend == std::string("eager") ? 2.0 : 1.0) + 0.001 * (k % 5));
          r.instructions.push_back(base *
                                       (n >= 10 && backend == std::string("codegen") ? 1.02 : 1) +
                                   (k * 37 + n * 11) % 300);
        }
        rs.push_back(std::move(r));
      }
      s->add_results(run, rs);
      s->finish_run(run, "complete");
    }
  }
  const auto r = run_crucible("regressions --all --format csv --db " + db.string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("regression,small,mlp,codegen,performance,pmu_instructions,2.0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(",10,10,1,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(",instructions,"), std::string::npos) << r.out;  // nothing simulated
  // The header, the step, its series not judged at run 12 (a new level: 3 of the 3 runs a
  // count's level needs, its whole baseline; run 13 is judged), and the detection floor of each
  // of the 4 series (2 times, 2 counts).
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
  size_t floors = 0;
  for (size_t at = r.out.find("\nfloor,"); at != std::string::npos;
       at = r.out.find("\nfloor,", at + 1))
    ++floors;
  EXPECT_EQ(floors, 4u) << r.out;
  EXPECT_NE(r.out.find("not judged (a new level: 3 of 3 runs at it)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// The dashboard's commands reproduce what the run did: its -c options that reach the backend
// (not another backend's), quoted as a shell needs them; where no bisection can run, the cell
// says why instead of staying empty.
TEST(Regressions, TheDashboardsCommandsCarryTheRunsOptions) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_regr_opts_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto page = [&](const std::string& commit_of_last) {
    const fs::path db = dir / (commit_of_last + ".db");
    {
      auto s = Store::open(db);
      for (int n = 1; n <= 3; ++n) {
        RunInfo info;
        info.suites = "small";
        info.backends = "eager,codegen";
        info.mode = "accuracy";
        info.env.git_commit = n < 3 ? std::string(40, static_cast<char>('0' + n)) : commit_of_last;
        info.env.command =
            "crucible run --suite small --backends eager,codegen --mode accuracy -c "
            "inject=neg:times2 -c libtorch:mode=jit --config 'codegen:eager_nodes=a b' "
            "-ceager:x=1";
        const int64_t run = s->begin_run(info);
        for (const std::string backend : {"eager", "codegen"}) {
          ResultRecord a = make_result("small", "mlp", backend, "accuracy", 4);
          a.status = n == 3 && backend == "codegen" ? Status::kFailAccuracy : Status::kPass;
          s->add_result(run, a);
        }
        s->finish_run(run, "complete");
      }
    }
    const fs::path site = dir / ("site_" + commit_of_last);
    EXPECT_EQ(
        run_crucible("report --html " + site.string() + " --since all --db " + db.string()).status,
        0);
    return testing::read_all(site / "regressions.html");
  };
  std::string html = page(std::string(40, '3'));
  EXPECT_NE(html.find("crucible minify --suite small --only mlp --backend codegen -c "
                      "inject=neg:times2 -c &#39;codegen:eager_nodes=a b&#39;</code>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("mode=jit"), std::string::npos) << html;   // libtorch's, not codegen's
  EXPECT_EQ(html.find("eager:x=1"), std::string::npos) << html;  // eager's
  EXPECT_NE(html.find("crucible bisect --good 2222222222 --bad 3333333333 -- --suite small"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("--backends codegen --mode accuracy -c inject=neg:times2"), std::string::npos)
      << html;
  EXPECT_NE(html.find("class=\"cmd\""), std::string::npos);
  html = page(std::string(40, '3') + "-dirty");
  EXPECT_NE(html.find("built from a tree with uncommitted changes: no commit to go back to"),
            std::string::npos)
      << html;
  html = page(std::string(40, '2'));  // the same commit before and after
  EXPECT_NE(html.find("the change is not in the code"), std::string::npos) << html;
  fs::remove_all(dir);
}

TEST(Regressions, StepsStatusChangesAndNewMachinesAreToldApart) {
  const fs::path dir = fs::temp_directory_path() / ("crucible_regr_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path db = dir / "r.db";
  {
    auto s = Store::open(db);
    // Runs 1-12 quiet; sin_cos on codegen 30% slower from run 13; mlp fails accuracy at run 15;
    // from run 17 another CPU, where everything is 10% slower.
    for (int n = 1; n <= 20; ++n) {
      const double env = n >= 17 ? 1.1 : 1.0;
      add_nightly(*s, n, (n >= 13 ? 1.3 : 1.0) * env,
                  n == 15 ? Status::kFailAccuracy : Status::kPass, n >= 17 ? "cpu B" : "cpu A");
    }
  }
  const std::string opt = " --format csv --db " + db.string();
  auto r = run_crucible("regressions --run 14" + opt);
  EXPECT_EQ(r.status, 1) << r.err;  // a regression: a nightly job fails
  EXPECT_NE(r.out.find("regression,small,sin_cos,codegen,performance,time/eager,30"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(",13,14,2,,\"cpp_fused_sin_0 +300.0 us, extern::gemm +0.0 us\","),
            std::string::npos)
      << r.out;  // the change point, the run that confirmed it, and the kernel that moved
  r = run_crucible("regressions --run 15" + opt);
  EXPECT_EQ(r.status, 1);
  // The level found at runs 13-14 is the baseline of the runs right after it: not yet judged.
  EXPECT_NE(r.out.find("not_judged,small,sin_cos,codegen,performance,time/eager,,,,,15,15,0,,,"
                       "not judged (a new level: 3 of 4 runs at it)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("status,small,mlp,codegen,accuracy,,,,,,15,15,1,,,pass -> fail_accuracy"),
            std::string::npos)
      << r.out;
  // Its timing, skipped for that failure, is not a second status change.
  EXPECT_EQ(r.out.find("pass -> skipped"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("status,small,mlp,codegen,performance"), std::string::npos) << r.out;
  r = run_crucible("regressions --run 17" + opt);
  EXPECT_EQ(r.status, 0) << r.out;  // a new machine is annotated, never a regression
  EXPECT_NE(r.out.find("environment,small,sin_cos,codegen,performance"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cpu cpu A -> cpu B"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("regression,"), std::string::npos) << r.out;
  // On the new CPU nothing is judged until it has a baseline of its own: said, not silent.
  EXPECT_NE(r.out.find("not_judged,small,sin_cos,codegen,performance,time/eager,,,,,17,17,0,,,"
                       "not judged (1 of 8 baseline runs)"),
            std::string::npos)
      << r.out;
  r = run_crucible("regressions --run 14" + opt);
  EXPECT_EQ(r.out.find("not_judged"), std::string::npos) << r.out;  // 13 runs before it
  EXPECT_EQ(r.out.find("floor,"), std::string::npos) << r.out;      // floors: with --all
  r = run_crucible("regressions --all" + opt);
  EXPECT_EQ(r.status, 1);
  // The header, the step, the status change, the new CPU noted once per timed series (4), each
  // timed series not judged at its newest run (4 of 8 baseline runs on the new CPU), and the 2
  // ratios' detection floors on their short baselines (eager's time alone has none yet).
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 13) << r.out;
  EXPECT_NE(r.out.find("on a short baseline of 4 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(",20,20,0,,,not judged (4 of 8 baseline runs)"), std::string::npos) << r.out;
  // The console table fits 120 columns, the note on a line of its own; --wide has everything.
  for (const std::string cmd : {"regressions --all --db ", "compare 12 13 --db "}) {
    r = run_crucible(cmd + db.string());
    std::istringstream lines(r.out);
    size_t longest = 0;
    for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
    EXPECT_LE(longest, 120u) << cmd << "\n" << r.out;
    EXPECT_EQ(r.out.find("threshold_pct"), std::string::npos) << r.out;
    const auto wide = run_crucible(cmd + db.string() + " --wide");
    EXPECT_NE(wide.out.find(cmd[0] == 'r' ? "threshold_pct" : "speedup_ci_high_pct"),
              std::string::npos)
        << wide.out;
  }
  r = run_crucible("regressions --all --db " + db.string());
  EXPECT_NE(r.out.find("\n  note: 2 runs at the new level; time/eager +30.0%"), std::string::npos)
      << r.out;
  // The dashboard says how much was not judged, and why.
  ASSERT_EQ(
      run_crucible("report --html " + (dir / "site").string() + " --since all --db " + db.string())
          .status,
      0);
  const std::string regressions_page = testing::read_all(dir / "site" / "regressions.html");
  EXPECT_NE(regressions_page.find("4 series not judged at their newest run: too few runs of their "
                                  "environment"),
            std::string::npos);
  // ... and the smallest step each series can show now, the ratios on their short baselines.
  EXPECT_NE(regressions_page.find("<h2>Detection floors</h2>"), std::string::npos);
  EXPECT_NE(regressions_page.find("<td>time/eager</td><td class=n>2.0%</td>"), std::string::npos)
      << regressions_page;
  EXPECT_NE(regressions_page.find("<td>short baseline</td>"), std::string::npos);
  // The index opens with what the newest run confirmed; each model's charts mark its alerts.
  const std::string index = testing::read_all(dir / "site" / "index.html");
  EXPECT_NE(index.find("<div class=\"banner ok\">No regression confirmed by run 20. 4 series not "
                       "judged at this run."),
            std::string::npos)
      << index;
  bool marked = false;
  for (const auto& f : fs::directory_iterator(dir / "site")) {
    const std::string page = testing::read_all(f.path());
    if (page.find("<h1>sin_cos (small)</h1>") == std::string::npos) continue;
    marked = page.find("Marked on the charts: regression +30.0% at run 13") != std::string::npos &&
             page.find("\"marks\": [{\"t\": ") != std::string::npos;
  }
  EXPECT_TRUE(marked);
  // The same history cut at run 14, which confirmed the step: the banner names it.
  const fs::path cut = dir / "cut.db";
  fs::copy_file(db, cut);
  testing::query_text(
      cut,
      "DELETE FROM kernels WHERE result_id IN (SELECT id FROM results WHERE run_id > "
      "14); DELETE FROM accuracy WHERE result_id IN (SELECT id FROM results WHERE "
      "run_id > 14); DELETE FROM results WHERE run_id > 14; DELETE FROM runs WHERE "
      "id > 14; SELECT 1");
  ASSERT_EQ(
      run_crucible("report --html " + (dir / "cut").string() + " --since all --db " + cut.string())
          .status,
      0);
  EXPECT_NE(
      testing::read_all(dir / "cut" / "index.html").find("<b>1 regression confirmed by run 14</b>"),
      std::string::npos);
  EXPECT_NE(testing::read_all(dir / "cut" / "index.html")
                .find("<li>small/sin_cos on codegen: regression +30.0%</li>"),
            std::string::npos);
  // compare: the step between runs 12 and 13 with its interval and kernel; statuses both ways.
  r = run_crucible("compare 12 13" + opt);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("small,sin_cos,codegen,performance,pass,pass,1,1.3,30"), std::string::npos)
      << r.out;
  // Eager did not move: judged over eager, the same +30%, which `regressions` found there too.
  EXPECT_NE(r.out.find(",\"slower: the level change regressions found at run 13 (+30.0% on "
                       "time/eager, confirmed by run 14)\",time/eager,\"cpp_fused_sin_0 +300.0 us"),
            std::string::npos)
      << r.out;
  // The speed-up fell from 2 to 2/1.3 (-23.1%), its bootstrap interval around that and clear of 0.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex("small,sin_cos,codegen,performance,(?:[^,]*,){11}([-0-9.e]+),([-0-9.e]+),"
                 "([-0-9.e]+),\"slower")))
      << r.out;
  EXPECT_NEAR(std::stod(m[1]), -23.08, 0.1);
  EXPECT_LT(std::stod(m[2]), std::stod(m[1]) + 1e-9);
  EXPECT_GT(std::stod(m[3]), std::stod(m[1]) - 1e-9);
  EXPECT_LT(std::stod(m[3]), -20);
  EXPECT_NE(r.out.find("small,sin_cos,eager,performance,pass,pass,2,2,0,"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(",same,"), std::string::npos) << r.out;
  // Run 17's CPU slows codegen's sin_cos alone: eager did not move, so it stays plain "slower".
  r = run_crucible("compare 16 17" + opt);
  EXPECT_NE(r.out.find("small,sin_cos,codegen,performance,pass,pass,1.3,1.43"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(",slower,time/eager,\"cpp_fused_sin_0 +130.0 us"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("the machine"), std::string::npos) << r.out;
  r = run_crucible("compare 14 15" + opt);
  EXPECT_NE(r.out.find("small,mlp,codegen,accuracy,pass,fail_accuracy"), std::string::npos);
  EXPECT_NE(r.out.find("status: pass -> fail_accuracy"), std::string::npos) << r.out;
  r = run_crucible("compare 15 16" + opt);
  EXPECT_NE(r.out.find("fixed: fail_accuracy -> pass"), std::string::npos) << r.out;
  r = run_crucible("compare 1 999" + opt);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no run with id 999"), std::string::npos) << r.err;
  // A calibration that measured 20% run-to-run noise for sin_cos on codegen: a 30% step is
  // within 4 x that, so it is no longer called (the calibrated noise is a floor).
  {
    Calibration c;
    c.suite = "small";
    c.model = "sin_cos";
    c.backend = "codegen";
    c.runs = 5;
    c.run_ids = "1,2,3,4,5";
    c.time_cv = 0.20;
    Store::open(db)->add_calibration(c);
  }
  r = run_crucible("regressions --run 14" + opt);
  EXPECT_EQ(r.out.find("regression,small,sin_cos,codegen"), std::string::npos) << r.out;
  // A reference that never ran would judge every time alone in silence: refused, in one line.
  r = run_crucible("regressions --reference eagr" + opt);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--reference eagr: no result of that backend in"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(backends: codegen, eager)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = run_crucible("regressions --run 999" + opt);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no run with id 999"), std::string::npos) << r.err;
  // A result the harness flagged noisy is shown, never called faster or slower.
  ASSERT_EQ(testing::query_text(db,
                                "UPDATE results SET noisy = 1 WHERE run_id = 13 AND model = "
                                "'sin_cos' AND backend = 'codegen' AND mode = 'performance'; "
                                "SELECT changes()"),
            "1\n");
  r = run_crucible("compare 12 13" + opt);
  EXPECT_NE(r.out.find("small,sin_cos,codegen,performance,pass,pass,1,1.3,30"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(",noisy: not judged,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(",slower,"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST_F(History, MergeIsIdempotentAndKeepsRunsWhole) {
  // A second shard with its own run, and the first shard merged twice.
  const fs::path shard2 = dir_ / "s2.db";
  { add_run(*Store::open(shard2), "night3", 0.5, Status::kPass); }
  const fs::path out = dir_ / "all.db";
  auto r = run_crucible("db merge " + out.string() + " " + db_.string() + " " + shard2.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 runs added (0 already present), 16 results, 0 accuracy rows, 8 kernel"),
            std::string::npos)
      << r.out;
  r = run_crucible("db merge " + out.string() + " " + db_.string() + " " + shard2.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("0 runs added (2 already present), 0 results"), std::string::npos) << r.out;

  auto merged = Store::open_readonly(out);
  EXPECT_EQ(merged->query("SELECT count(*) FROM runs").rows[0][0], Cell{int64_t{3}});
  EXPECT_EQ(merged->query("SELECT count(*) FROM results").rows[0][0], Cell{int64_t{24}});
  // Each run's results, samples and kernels came with it, under the new ids.
  const Table t = merged->query(
      "SELECT r.tag, count(DISTINCT x.id), sum(length(x.samples)), count(k.name) FROM runs r"
      " JOIN results x ON x.run_id = r.id LEFT JOIN kernels k ON k.result_id = x.id"
      " GROUP BY r.id ORDER BY r.tag");
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[2][0], Cell{std::string("night3")});
  EXPECT_EQ(t.rows[2][1], Cell{int64_t{8}});
  EXPECT_EQ(t.rows[2][3], Cell{int64_t{4}});
  EXPECT_EQ(merged
                ->query("SELECT count(*) FROM kernels k LEFT JOIN results x ON"
                        " x.id = k.result_id WHERE x.id IS NULL")
                .rows[0][0],
            Cell{int64_t{0}});  // no orphan
  EXPECT_EQ(merged->integrity_check(), "ok");

  // Merging into itself, or a missing shard: one line, exit 2, nothing added.
  r = run_crucible("db merge " + out.string() + " " + out.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("into itself"), std::string::npos) << r.err;
  r = run_crucible("db merge " + out.string() + " " + (dir_ / "missing.db").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(Store::open_readonly(out)->query("SELECT count(*) FROM runs").rows[0][0],
            Cell{int64_t{3}});
}

TEST_F(History, EightShardsWrittenConcurrentlyMergeWithoutLoss) {
  // Eight processes each write their own shard at once, as eight sharded CI jobs would.
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto s = Store::open(dir_ / ("shard" + std::to_string(i) + ".db"));
      for (int n = 0; n < 5; ++n) add_run(*s, "shard" + std::to_string(i), 1.0 + n, Status::kPass);
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::string cmd = "db merge " + (dir_ / "all.db").string();
  for (int i = 0; i < 8; ++i) cmd += " " + (dir_ / ("shard" + std::to_string(i) + ".db")).string();
  auto r = run_crucible(cmd);
  ASSERT_EQ(r.status, 0) << r.err;
  auto all = Store::open_readonly(dir_ / "all.db");
  EXPECT_EQ(all->query("SELECT count(*) FROM runs").rows[0][0], Cell{int64_t{40}});
  EXPECT_EQ(all->query("SELECT count(*) FROM results").rows[0][0], Cell{int64_t{320}});
  EXPECT_EQ(all->query("SELECT count(*) FROM kernels").rows[0][0], Cell{int64_t{160}});
  EXPECT_EQ(all->query("SELECT count(DISTINCT uuid) FROM runs").rows[0][0], Cell{int64_t{40}});
}

}  // namespace
}  // namespace crucible::reports
