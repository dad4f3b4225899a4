// The SQLite store on its own: schema creation and re-opening (also by many processes at once),
// WAL and the rollback journal on network file systems, round trips of every field, the
// abandoned-run rule, merges refusing unfinished runs, and the errors for a file that is not ours.
#include "crucible/reports/store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

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
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path_.string() + suffix);
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

// A status is read back as the enum: a name this build does not know (a damaged row, a newer
// crucible's) is an error naming the result, never a silent "not pass".
TEST_F(StoreTest, AStatusThisBuildDoesNotKnowIsAnErrorNamingTheResult) {
  int64_t run;
  {
    auto store = Store::open(path_);
    run = store->begin_run({});
    ResultRecord r = make_result("s", "m", "eager", "accuracy", 1);
    r.status = Status::kFailAccuracy;
    store->add_result(run, r);
    EXPECT_EQ(store->results(run).at(0).status, Status::kFailAccuracy);
  }
  const std::string cmd =
      "sqlite3 " + path_.string() + " \"UPDATE results SET status = 'fail_sideways'\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto store = Store::open(path_);
  try {
    store->results(run);
    FAIL() << "an unknown status was read";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("result 1: status 'fail_sideways' is not one"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(store->status_history("s", "m", "eager", "accuracy", run, 10), StoreError);
}

// fuzz_store_file's hang: a NaN sample made compare's rank test loop for ever (NaN equals no
// value, itself included). Every list of doubles is read through one place, which refuses a
// value that is not finite and a blob that is not whole doubles, naming the file and the column;
// each reader that sees samples or counts says so instead of hanging or sorting NaNs.
// `compare` judges a backend on its time over eager's of the same run where both runs have eager:
// a machine that slowed the whole run twice over moves nothing there, and eager's row says it
// was the machine; a codegen step with eager steady is "slower" over eager; a run without eager
// leaves its backends judged on their times, and says so.
TEST_F(StoreTest, CompareJudgesTimeOverEagerWhereBothRunsHaveIt) {
  auto store = Store::open(path_);
  // Twelve samples around `ms`, spread 0.5% (deterministic).
  auto samples = [](double ms) {
    std::vector<double> v;
    for (int i = 0; i < 12; ++i) v.push_back(ms * (1 + 0.001 * ((i * 7) % 11 - 5)));
    return v;
  };
  auto add_run = [&](std::vector<std::pair<std::string, double>> backends) {
    const int64_t run = store->begin_run({});
    for (const auto& [backend, ms] : backends) {
      ResultRecord r = make_result("s", "m", backend, "performance", 1);
      r.status = Status::kPass;
      r.samples_ms = samples(ms);
      store->add_result(run, r);
    }
    store->finish_run(run, "complete");
    return run;
  };
  // Six runs alike first: the noise each verdict is held to comes from the store's history.
  int64_t a = 0;
  for (int i = 0; i < 6; ++i) a = add_run({{"eager", 10}, {"codegen", 5}});
  const int64_t slow_machine = add_run({{"eager", 20}, {"codegen", 10}});
  const int64_t step = add_run({{"eager", 20}, {"codegen", 13}});
  const int64_t no_eager = add_run({{"codegen", 13}});
  auto row_of = [&](int64_t x, int64_t y, const std::string& backend) {
    const Table t = store->compare(x, y);
    for (const auto& row : t.rows) {
      if (cell_text(row[t.column("backend")], false) == backend) {
        return std::make_pair(cell_text(row[t.column("verdict")], false),
                              cell_text(row[t.column("judged_on")], false));
      }
    }
    return std::make_pair(std::string("missing"), std::string());
  };
  EXPECT_EQ(row_of(a, slow_machine, "codegen"),
            std::make_pair(std::string("same"), std::string("time/eager")));
  EXPECT_EQ(row_of(a, slow_machine, "eager"),
            std::make_pair(std::string("machine: slower on every backend"), std::string("time")));
  EXPECT_EQ(row_of(slow_machine, step, "codegen"),
            std::make_pair(std::string("slower"), std::string("time/eager")));
  EXPECT_EQ(row_of(slow_machine, step, "eager").first, "same");
  EXPECT_EQ(row_of(step, no_eager, "codegen"),
            std::make_pair(std::string("same"), std::string("time")));
  EXPECT_EQ(row_of(step, no_eager, "eager").first, "only in A");
}

TEST_F(StoreTest, ASampleListThatIsNotFiniteDoublesIsADamagedRow) {
  int64_t a = 0, b = 0;
  auto two_sound_runs = [&] {
    TearDown();
    auto store = Store::open(path_);
    for (int64_t* run : {&a, &b}) {
      *run = store->begin_run({});
      ResultRecord r = make_result("s", "m", "eager", "performance", 1);
      r.samples_ms = {1.0, 1.5, 2.0};
      r.instructions = {100.0, 101.0, 99.0};
      store->add_result(*run, r);
      store->finish_run(*run, "complete");
    }
  };
  struct Damage {
    const char* column;
    const char* blob;   // SQLite hex: little-endian doubles
    const char* error;  // what the one line says
  };
  const Damage damages[] = {
      {"samples", "000000000000F87F", "column 'samples' holds nan, not a finite number"},
      {"samples", "000000000000F0FF", "column 'samples' holds -inf, not a finite number"},
      {"samples", "000000000000F03F000000", "column 'samples' holds 11 bytes, not a list"},
      {"instructions", "000000000000F07F", "column 'instructions' holds inf, not a finite"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.blob);
    two_sound_runs();
    const std::string cmd =
        fmt::format("sqlite3 {} \"UPDATE results SET {} = X'{}' WHERE run_id = {}\"",
                    path_.string(), d.column, d.blob, b);
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto store = Store::open(path_);
    auto expect_damage = [&](const char* reader, auto&& read) {
      try {
        read();
        FAIL() << reader << " read the damaged row";
      } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find(d.error), std::string::npos)
            << reader << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("(a damaged row)"), std::string::npos) << e.what();
      }
    };
    if (std::string(d.column) == "samples") {
      expect_damage("results", [&] { store->results(b); });
      expect_damage("compare", [&] { store->compare(a, b); });
    }
    expect_damage("regressions", [&] { store->regressions({}); });
    // The sound run still reads.
    EXPECT_EQ(store->results(a).at(0).samples_ms, (std::vector<double>{1.0, 1.5, 2.0}));
  }
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
  // A version no crucible wrote (negative, or past int) is damage, refused before it picks a
  // migration step: -1 once indexed the steps out of range.
  for (const char* bad : {"-1", "-2147483649", "4294967297"}) {
    ASSERT_EQ(std::system(("sqlite3 " + path_.string() +
                           " \"UPDATE schema_version SET version = " + bad + "\"")
                              .c_str()),
              0);
    try {
      Store::open(path_);
      ADD_FAILURE() << bad;
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("database schema version ") + bad +
                                           " is not a version (damaged store?)"),
                std::string::npos)
          << e.what();
    }
  }
  fs::path text = path_.string() + ".txt";
  std::ofstream(text) << std::string(200, 'x');
  EXPECT_THROW(Store::open(text), StoreError);
  fs::remove(text);
  EXPECT_THROW(Store::open("/nonexistent/dir/x.db"), StoreError);
}

// Opens the store at `path` in `n` child processes released together (each blocks on a pipe the
// parent closes once all are forked), each writing one run with one result and finishing it.
// Returns what each child that failed said.
std::vector<std::string> open_together_in_processes(const fs::path& path, int n) {
  int go[2];
  if (::pipe(go) != 0) return {"pipe failed"};
  std::vector<std::pair<pid_t, fs::path>> kids;
  for (int i = 0; i < n; ++i) {
    const fs::path err = path.string() + ".err" + std::to_string(i);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      char c;
      while (::read(go[0], &c, 1) > 0) {
      }
      int status = 0;
      try {
        auto store = Store::open(path);
        RunInfo info;
        info.tag = "writer" + std::to_string(i);
        const int64_t run = store->begin_run(info);
        store->plan_run(run, 1);
        store->add_result(run, make_result("tutorial", "sin_cos", "eager", "accuracy", 10));
        store->finish_run(run, "complete");
      } catch (const std::exception& e) {
        std::ofstream(err) << e.what();
        status = 1;
      }
      ::_exit(status);
    }
    kids.emplace_back(pid, err);
  }
  ::close(go[0]);
  ::close(go[1]);  // every child's read() returns now
  std::vector<std::string> failures;
  for (const auto& [pid, err] : kids) {
    int raw = 0;
    ::waitpid(pid, &raw, 0);
    if (!WIFEXITED(raw) || WEXITSTATUS(raw) != 0) {
      std::ifstream in(err);
      std::string what((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      failures.push_back(what.empty() ? "child died with status " + std::to_string(raw) : what);
    }
    fs::remove(err);
  }
  return failures;
}

void remove_db(const fs::path& p) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(p.string() + suffix);
}

// Issue 31 item 3: `crucible run --db new.db` started four times at once lost three runs to
// "table runs already exists". Several rounds, each on a new file, so a lucky order cannot pass.
TEST_F(StoreTest, ProcessesOpeningANewStoreTogetherAllCreateItOnce) {
  constexpr int kWriters = 6;
  for (int round = 0; round < 5; ++round) {
    const fs::path p = path_.string() + ".together" + std::to_string(round);
    remove_db(p);
    const auto failures = open_together_in_processes(p, kWriters);
    EXPECT_TRUE(failures.empty()) << "round " << round << ": " << failures.size() << " of "
                                  << kWriters << " writers failed, first: " << failures.front();
    auto store = Store::open_readonly(p);
    EXPECT_EQ(store->schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(store->runs(100).size(), static_cast<size_t>(kWriters));
    EXPECT_TRUE(store->unfinished_runs().empty());
    EXPECT_EQ(store->integrity_check(), "ok");
    store.reset();
    remove_db(p);
  }
}

// The same with threads of one process (a tool that opens a store per thread).
TEST_F(StoreTest, ThreadsOpeningANewStoreTogetherAllCreateItOnce) {
  constexpr int kWriters = 6;
  std::barrier start(kWriters);
  std::atomic<int> failed{0};
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        auto store = Store::open(path_);
        const int64_t run = store->begin_run({});
        store->finish_run(run, "complete");
      } catch (const std::exception& e) {
        errors[i] = e.what();
        ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0) << errors[0] << errors[1] << errors[2];
  EXPECT_EQ(Store::open(path_)->runs(100).size(), static_cast<size_t>(kWriters));
}

// An old store opened by several new crucibles at once is migrated once, its rows kept.
TEST_F(StoreTest, ProcessesMigratingAnOldStoreTogetherMigrateItOnce) {
  const std::string sql = std::string(migrations().at(0)) +
                          "CREATE TABLE schema_version (version INTEGER NOT NULL);"
                          "INSERT INTO schema_version VALUES (1);"
                          "INSERT INTO runs (started_at, status, suites, backends, mode, hostname,"
                          " pid) VALUES ('2026-01-01', 'complete', 's', 'eager', 'accuracy',"
                          " 'h', 1);";
  std::ofstream(path_.string() + ".sql") << sql;
  ASSERT_EQ(std::system(("sqlite3 " + path_.string() + " < " + path_.string() + ".sql").c_str()),
            0);
  fs::remove(path_.string() + ".sql");
  const auto failures = open_together_in_processes(path_, 4);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  auto store = Store::open(path_);
  EXPECT_EQ(store->schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(store->runs(100).size(), 5u);
}

// Issue 31 item 11: WAL's index is shared memory of one host; on NFS, SMB, Lustre, GPFS, CephFS,
// FUSE ... the store keeps a rollback journal.
TEST(JournalMode, NetworkFileSystemsGetARollbackJournal) {
  for (int64_t network : {0x6969L, 0xFF534D42L, 0xFE534D42L, 0x517BL, 0x65735546L, 0x0BD00BD0L,
                          0x47504653L, 0x00C36400L, 0x01021997L, 0x19830326L}) {
    EXPECT_TRUE(is_network_filesystem(network)) << std::hex << network;
    EXPECT_EQ(journal_mode_for(network), "delete") << std::hex << network;
    EXPECT_EQ(journal_mode_for(network, "auto"), "delete");
    EXPECT_EQ(journal_mode_for(network, "wal"), "wal");  // the operator's word wins
  }
  // ext4, xfs, btrfs, tmpfs, overlayfs, zfs: local.
  for (int64_t local : {0xEF53L, 0x58465342L, 0x9123683EL, 0x01021994L, 0x794C7630L, 0x2FC12FC1L}) {
    EXPECT_FALSE(is_network_filesystem(local)) << std::hex << local;
    EXPECT_EQ(journal_mode_for(local), "wal") << std::hex << local;
    EXPECT_EQ(journal_mode_for(local, "truncate"), "truncate");
  }
  EXPECT_THROW(journal_mode_for(0xEF53, "off"), StoreError);  // no journal: not a store's mode
  EXPECT_THROW(journal_mode_for(0xEF53, "WAL2"), StoreError);
}

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(StoreTest, StoreOnANetworkFileSystemUsesARollbackJournal) {
  {
    // What a store on NFS gets; CRUCIBLE_JOURNAL_MODE stands in for the mount here.
    ScopedEnv env("CRUCIBLE_JOURNAL_MODE", "delete");
    EXPECT_EQ(journal_mode_for_path(path_), "delete");
    auto store = Store::open(path_);
    EXPECT_EQ(store->journal_mode(), "delete");
    const int64_t run = store->begin_run({});
    store->add_result(run, make_result("tutorial", "sin_cos", "eager", "accuracy", 10));
    store->finish_run(run, "complete");
    EXPECT_FALSE(fs::exists(path_.string() + "-wal"));
    EXPECT_FALSE(fs::exists(path_.string() + "-shm"));
  }
  {
    ScopedEnv env("CRUCIBLE_JOURNAL_MODE", "delete");
    // Writers released together work under the rollback journal's locks too.
    const auto failures = open_together_in_processes(path_, 4);
    EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
    EXPECT_EQ(Store::open(path_)->runs(100).size(), 5u);
  }
  {
    ScopedEnv env("CRUCIBLE_JOURNAL_MODE", "nfs");
    EXPECT_THROW(Store::open(path_), StoreError);
  }
  // Back on a local file system without the override: WAL again (the temp directory is local).
  EXPECT_EQ(Store::open(path_)->journal_mode(), "wal");
}

// Issue 31 item 10: a shard killed mid-run leaves its run 'running' with part of its results; the
// merge must refuse it, naming the file and the run, unless told to take it anyway.
TEST_F(StoreTest, MergeRefusesAShardWhoseRunDidNotFinish) {
  const fs::path good = path_.string() + ".good.db", lost = path_.string() + ".lost.db",
                 short_one = path_.string() + ".short.db", out = path_.string() + ".out.db";
  for (const auto& p : {good, lost, short_one, out}) remove_db(p);
  {
    auto s = Store::open(good);
    RunInfo info;
    info.tag = "shard0";
    const int64_t run = s->begin_run(info);
    s->plan_run(run, 2);
    s->add_result(run, make_result("tutorial", "sin_cos", "eager", "accuracy", 10));
    s->add_result(run, make_result("tutorial", "add_add_mul_add", "eager", "accuracy", 10));
    s->finish_run(run, "complete");
    EXPECT_TRUE(s->unfinished_runs().empty());
  }
  {
    auto s = Store::open(lost);
    RunInfo info;
    info.tag = "shard1";
    const int64_t run = s->begin_run(info);
    s->plan_run(run, 3);
    s->add_result(run, make_result("tutorial", "neg_maximum_cat_u8", "eager", "accuracy", 1));
    // killed here: never finished
  }
  {
    auto s = Store::open(short_one);  // says complete, but holds fewer results than it planned
    RunInfo info;
    info.tag = "shard2";
    const int64_t run = s->begin_run(info);
    s->plan_run(run, 2);
    s->add_result(run, make_result("tutorial", "linear_layernorm_relu", "eager", "accuracy", 1));
    s->finish_run(run, "complete");
  }
  {
    auto u = Store::open_readonly(lost)->unfinished_runs();
    ASSERT_EQ(u.size(), 1u);
    EXPECT_EQ(u[0].status, "running");
    EXPECT_EQ(u[0].results, 1);
    EXPECT_EQ(u[0].planned, 3);
    EXPECT_NE(describe(u[0]).find("'running'"), std::string::npos) << describe(u[0]);
    EXPECT_NE(describe(u[0]).find("1 of 3 planned results"), std::string::npos) << describe(u[0]);
    EXPECT_NE(describe(u[0]).find("tag shard1"), std::string::npos) << describe(u[0]);
  }
  auto merged = Store::open(out);
  merged->merge(good);
  for (const auto& [file, what] :
       {std::pair{lost, std::string("'running'")}, {short_one, std::string("1 of 2 planned")}}) {
    try {
      merged->merge(file);
      ADD_FAILURE() << file << " was merged";
    } catch (const StoreError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file.string()), std::string::npos) << m;
      EXPECT_NE(m.find("run 1 "), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
      EXPECT_NE(m.find("merge refused"), std::string::npos) << m;
    }
  }
  EXPECT_EQ(merged->runs(100).size(), 1u);  // nothing of the refused shards
  const MergeStats st = merged->merge(lost, MergeOptions{true});
  EXPECT_EQ(st.runs, 1);
  EXPECT_EQ(st.results, 1);
  // Once here, the run is not copied again, so merging that shard is no longer an error.
  EXPECT_EQ(merged->merge(lost).runs, 0);
  EXPECT_EQ(merged->unfinished_runs().size(), 1u);  // and the merged store says what it lacks
  for (const auto& p : {good, lost, short_one, out}) remove_db(p);
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
