// Scale-out through the real CLI (issue 31, items 3, 10 and 12): runs started together on a new
// store all record, `db merge` refuses a shard whose run did not finish and names it, and `run`
// refuses codegen in one line when this node has no C++ compiler.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.h"
#include "crucible/reports/store.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::fresh_test_dir;
using testing::read_all;
using testing::run_command;
using testing::run_crucible;

// Issue 31 item 3: four `crucible run --db new.db` started together; three used to exit 2 with
// "table runs already exists". Each waits for the same file to appear, so all open the new store
// within a few milliseconds of each other.
TEST(ScaleOut, RunsStartedTogetherOnANewStoreAllRecord) {
  const fs::path dir = fresh_test_dir("crucible_scale");
  const fs::path db = dir / "fresh.db", go = dir / "go";
  constexpr int kRuns = 4;
  std::string script;
  for (int i = 0; i < kRuns; ++i) {
    const fs::path out = dir / ("out" + std::to_string(i));
    script += "( while [ ! -e " + go.string() + " ]; do sleep 0.005; done; " + CRUCIBLE_BIN_DIR +
              "/crucible run --db " + db.string() + " -o " + out.string() +
              " --suite tutorial --only sin_cos --backends eager --mode accuracy --threads 1" +
              " --tag together" + std::to_string(i) + " >" + out.string() + ".log 2>&1; echo $? >" +
              out.string() + ".rc ) &\n";
  }
  script += "sleep 0.3; touch " + go.string() + "; wait\n";
  std::ofstream(dir / "together.sh") << script;
  ASSERT_EQ(run_command("bash " + (dir / "together.sh").string()).status, 0);
  for (int i = 0; i < kRuns; ++i) {
    const fs::path out = dir / ("out" + std::to_string(i));
    const std::string rc = read_all(out.string() + ".rc");
    EXPECT_TRUE(rc == "0\n" || rc == "1\n") << "run " << i << " exited " << rc << ":\n"
                                            << read_all(out.string() + ".log");
    // Each run wrote its own output folder.
    EXPECT_TRUE(fs::exists(out / "logs")) << out;
  }
  auto store = reports::Store::open_readonly(db);
  const auto runs = store->runs(100);
  EXPECT_EQ(runs.size(), static_cast<size_t>(kRuns));
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, "complete") << "run " << r.id;
    EXPECT_EQ(r.results, 1) << "run " << r.id;
  }
  EXPECT_TRUE(store->unfinished_runs().empty());
  fs::remove_all(dir);
}

// Writes a shard database with one run of `results` results, finished or left as a killed
// process leaves it.
void write_shard(const fs::path& db, const std::string& tag, int planned, int results,
                 bool finished) {
  auto store = reports::Store::open(db);
  reports::RunInfo info;
  info.tag = tag;
  info.suites = "tutorial";
  info.backends = "eager";
  info.mode = "accuracy";
  const int64_t run = store->begin_run(info);
  store->plan_run(run, planned);
  for (int i = 0; i < results; ++i) {
    store->add_result(
        run, reports::make_result("tutorial", "model" + std::to_string(i), "eager", "accuracy", 1));
  }
  if (finished) store->finish_run(run, "complete");
}

// Issue 31 item 10: a shard killed by SIGKILL leaves its run 'running' with part of its results.
TEST(ScaleOut, DbMergeRefusesAShardWhoseRunDidNotFinishAndNamesIt) {
  const fs::path dir = fresh_test_dir("crucible_scale");
  const fs::path s0 = dir / "shard_0.db", s1 = dir / "shard_1.db", out = dir / "merged.db";
  write_shard(s0, "slurm:7/0", 2, 2, true);
  write_shard(s1, "slurm:7/1", 3, 1, false);
  auto r = run_crucible("db merge " + out.string() + " " + s0.string() + " " + s1.string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(s1.string() + ": 1 run did not finish"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run 1 (tag slurm:7/1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'running'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 of 3 planned results"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(s0.string()), std::string::npos)
      << "the good shard is not blamed: " << r.err;
  EXPECT_FALSE(fs::exists(out)) << "refused before the output was created";

  r = run_crucible("db merge --allow-incomplete " + out.string() + " " + s0.string() + " " +
                   s1.string());
  EXPECT_EQ(r.status, 0) << r.err;
  auto merged = reports::Store::open_readonly(out);
  EXPECT_EQ(merged->runs(10).size(), 2u);
  EXPECT_EQ(merged->unfinished_runs().size(), 1u);
  merged.reset();
  // Runs already merged are not copied again, so a later merge of the same shards is not refused.
  r = run_crucible("db merge " + out.string() + " " + s0.string() + " " + s1.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("0 runs added (1 already present)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// Issue 31 item 12: codegen compiles on the node that runs it; without a compiler, `run` says so
// once, before it records a run, instead of failing every model as fail_to_compile. The harness
// names no compiler: the codegen plugin declares what it misses (Backend::unavailable_here),
// asked in the pre-run worker.
TEST(ScaleOut, RunRefusesCodegenWithoutACompilerInOneLine) {
  const fs::path dir = fresh_test_dir("crucible_scale");
  const fs::path db = dir / "t.db";
  const std::string args = "run --db " + db.string() + " -o " + (dir / "out").string() +
                           " --suite tutorial --only sin_cos --mode accuracy --threads 1";
  auto r = run_crucible(args + " --backends eager,codegen", "CXX=/nonexistent/bin/g++");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("codegen: no C++ compiler: $CXX is '/nonexistent/bin/g++'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(db)) << "no run recorded";
  // eager needs no compiler.
  r = run_crucible(args + " --backends eager", "CXX=/nonexistent/bin/g++");
  EXPECT_EQ(r.status, 0) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible
