// The SQLite store on its own: schema creation and re-opening, WAL, round trips of every field, the
// abandoned-run rule, and the errors for a file that is not ours.
#include "crucible/reports/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "crucible/reports/json.h"
#include "schema.h"

namespace crucible::reports {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("crucible_store_" + std::to_string(::getpid()) + ".db");
    fs::remove(path_);
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_.string() + suffix);
  }
  fs::path path_;
};

TEST_F(StoreTest, CreatesSchemaOnceAndReopens) {
  { EXPECT_EQ(Store::open(path_)->schema_version(), Store::kSchemaVersion); }
  auto again = Store::open(path_);
  EXPECT_EQ(again->schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(again->integrity_check(), "ok");
  EXPECT_TRUE(fs::exists(path_.string() + "-wal"));  // WAL mode
}

TEST_F(StoreTest, ResultsRoundTripWithSamplesAccuracyAndKernels) {
  auto store = Store::open(path_);
  RunInfo info;
  info.tag = "nightly";
  info.suites = "tutorial";
  info.backends = "eager,codegen";
  info.mode = "both";
  info.env.cores = 2;
  info.env.launcher["OMP_NUM_THREADS"] = "2";
  const int64_t run = store->begin_run(info);
  ResultRecord r;
  r.suite = "tutorial";
  r.model = "sin_cos";
  r.backend = "codegen";
  r.mode = "performance";
  r.batch_size = 10;
  r.status = reports::Status::kPass;
  r.samples_ms = {3.0, 1.0, 2.0, 10.0};
  r.speedup = 1.5;
  r.compile_s = 0.25;
  r.peak_rss_mb = 12;
  OutputAccuracy a;
  a.dtype = "f32";
  a.shape = "[10,10]";
  a.max_abs_err = 1e-6;
  a.passed = true;
  r.accuracy = {a};
  r.kernels = {{"cpp_fused_add_cos_sin_0", 1, 1200}, {"extern::gemm", 2, 5000}};
  const int64_t id = store->add_result(run, r);
  store->finish_run(run, "complete");

  auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "complete");
  EXPECT_EQ(runs[0].tag, "nightly");
  EXPECT_EQ(runs[0].results, 1);
  auto rows = store->results(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].samples_ms, (std::vector<double>{3.0, 1.0, 2.0, 10.0}));  // order kept, exact
  EXPECT_DOUBLE_EQ(rows[0].stats.median, 2.5);
  EXPECT_DOUBLE_EQ(*rows[0].speedup, 1.5);
  EXPECT_FALSE(rows[0].memory_ratio.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].max_abs_err, 1e-6);
  auto k = store->kernels(id);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "extern::gemm");  // by total time
  EXPECT_EQ(store->accuracy(id).at(0).shape, "[10,10]");
}

TEST_F(StoreTest, ReprosRoundTripAndPreviousStatusLooksBackOnly) {
  auto store = Store::open(path_);
  RunInfo info;
  info.suites = "tutorial";
  const int64_t first = store->begin_run(info);
  ResultRecord r = make_result("tutorial", "sin_cos", "codegen", "accuracy", 10);
  r.status = Status::kFailAccuracy;
  store->add_result(first, r);
  const int64_t second = store->begin_run(info);
  EXPECT_EQ(store->previous_status("tutorial", "sin_cos", "codegen", "accuracy", second),
            "fail_accuracy");
  EXPECT_FALSE(store->previous_status("tutorial", "sin_cos", "codegen", "accuracy", first));
  EXPECT_FALSE(store->previous_status("tutorial", "sin_cos", "eager", "accuracy", second));

  ReproRecord rep;
  rep.run_id = second;
  rep.suite = "tutorial";
  rep.model = "sin_cos";
  rep.backend = "codegen";
  rep.config = "inject=sin:crash";
  rep.outcome = "minimized";
  rep.signature = "crash: SIGSEGV during run of codegen";
  rep.message = "2 nodes -> 1";
  rep.nodes_before = 2;
  rep.nodes_after = 1;
  rep.compute_nodes = 1;
  rep.oracle_calls = 12;
  rep.cache_hits = 3;
  rep.flipped = 1;
  rep.original_failures = 3;
  rep.replays_ok = 5;
  rep.replays = 5;
  rep.wall_s = 0.5;
  rep.path = "/tmp/repro";
  store->add_repro(rep);
  ReproRecord flaky = rep;
  flaky.run_id.reset();
  flaky.model = "other";
  flaky.outcome = "flaky";
  flaky.path = "";
  store->add_repro(flaky);
  const auto all = store->repros();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].outcome, "flaky");
  EXPECT_FALSE(all[0].run_id);
  const auto mine = store->repros("sin_cos");
  ASSERT_EQ(mine.size(), 1u);
  const ReproRecord& got = mine[0];
  EXPECT_EQ(got.run_id, second);
  EXPECT_EQ(got.config, rep.config);
  EXPECT_EQ(got.signature, rep.signature);
  EXPECT_EQ(got.oracle_calls, 12);
  EXPECT_EQ(got.cache_hits, 3);
  EXPECT_EQ(got.flipped, 1);
  EXPECT_EQ(got.replays_ok, 5);
  EXPECT_DOUBLE_EQ(got.wall_s, 0.5);
  EXPECT_EQ(got.path, "/tmp/repro");
  rep.outcome = "done";  // not an outcome: the table refuses it, nothing half-written
  EXPECT_THROW(store->add_repro(rep), Error);
  EXPECT_EQ(store->repros().size(), 2u);
}

TEST_F(StoreTest, RunOfADeadProcessIsMarkedIncompleteOnOpen) {
  int64_t run;
  {
    auto store = Store::open(path_);
    run = store->begin_run({});
  }
  // Our own pid is alive, so the run stays 'running'...
  EXPECT_EQ(Store::open(path_)->runs().at(0).status, "running");
  // ...until the row says it belonged to a process that no longer exists.
  {
    std::string cmd = "sqlite3 " + path_.string() +
                      " \"UPDATE runs SET pid = 2147483000 WHERE id = " + std::to_string(run) +
                      "\"";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  EXPECT_EQ(Store::open(path_)->runs().at(0).status, "incomplete");
}

// A database written by the first schema (before the audited timing) keeps its rows and gains
// the new columns with their defaults.
TEST_F(StoreTest, VersionOneDatabaseMigratesAndKeepsItsRows) {
  const std::string sql = std::string(migrations().at(0)) +
                          "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                          "INSERT INTO schema_version VALUES (1);"
                          "INSERT INTO runs (started_at, status, suites, backends, mode, hostname,"
                          " pid) VALUES ('2026-01-01', 'complete', 's', 'eager', 'performance',"
                          " 'h', 1);"
                          "INSERT INTO results (run_id, suite, model, backend, mode, batch_size,"
                          " status, created_at) VALUES (1, 's', 'm', 'eager', 'performance', 1,"
                          " 'pass', '2026-01-01');";
  std::ofstream(path_.string() + ".sql") << sql;
  ASSERT_EQ(std::system(("sqlite3 " + path_.string() + " < " + path_.string() + ".sql").c_str()),
            0);
  fs::remove(path_.string() + ".sql");
  auto store = Store::open(path_);
  EXPECT_EQ(store->schema_version(), Store::kSchemaVersion);
  auto rows = store->results(1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].model, "m");
  EXPECT_FALSE(rows[0].noisy);
  EXPECT_EQ(rows[0].audit, "");
  EXPECT_EQ(store->integrity_check(), "ok");
}

TEST_F(StoreTest, NewerSchemaAndForeignFilesAreRefused) {
  { Store::open(path_); }
  ASSERT_EQ(
      std::system(
          ("sqlite3 " + path_.string() + " \"UPDATE schema_version SET version = 99\"").c_str()),
      0);
  try {
    Store::open(path_);
    ADD_FAILURE();
  } catch (const StoreError& e) {
    EXPECT_NE(
        std::string(e.what()).find("database schema version 99 is newer than this crucible's " +
                                   std::to_string(Store::kSchemaVersion)),
        std::string::npos)
        << e.what();
  }
  fs::path text = path_.string() + ".txt";
  std::ofstream(text) << std::string(200, 'x');
  EXPECT_THROW(Store::open(text), StoreError);
  fs::remove(text);
  EXPECT_THROW(Store::open("/nonexistent/dir/x.db"), StoreError);
}

}  // namespace
}  // namespace crucible::reports

namespace crucible::reports {
namespace {

TEST(Json, StringsEscapeQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(json_string("a\"b\\c\nd\te\rf\x01g"), "\"a\\\"b\\\\c\\nd\\te\\rf\\u0001g\"");
  EXPECT_EQ(json_number(0.5), "0.5");
  EXPECT_EQ(json_number(std::nan("")), "null");
  EXPECT_EQ(json_object({{"k", "v\""}, {"a", "1"}}), "{\"a\": \"1\", \"k\": \"v\\\"\"}");
}

}  // namespace
}  // namespace crucible::reports
