// `crucible run` end to end with real workers, the real SQLite store and a misbehaving test plugin:
// every fault becomes its status, the run finishes, and the other models' results are all there.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "cli_util.h"
#include "crucible/reports/store.h"
#include "memory_cgroup.h"
#include "test_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_crucible;

class HarnessRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_dir("crucible_run");
    fs::create_directories(dir_ / "suite");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One small graph per model; the graph name is what the faulty backend keys its faults on.
  void add_model(const std::string& name, const std::string& extra = "") {
    std::ofstream(dir_ / "suite" / (name + ".graph"))
        << "graph " << name
        << "(%x: f32[4,8], %y: f32[8]) {\n  %a = mul(%x, %y)\n  %b = neg(%a)\n  return %b\n}\n";
    std::ofstream(dir_ / "suite" / "suite.manifest", std::ios::app)
        << "model " << name << " graph=" << name << ".graph " << extra << "\n";
  }

  std::string run_args(const std::string& extra) const {
    return "run --suite " + (dir_ / "suite" / "suite.manifest").string() + " --db " +
           (dir_ / "r.db").string() + " --output-dir " + (dir_ / "out" / "run_{run}").string() +
           " --plugin-path " + CRUCIBLE_TEST_PLUGIN_DIR + " " + extra;
  }
  // No store and no outputs: the store's files go with it, as a WAL left beside a new database
  // would be replayed into it. No connection to it may be open.
  void start_anew() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      fs::remove(dir_ / ("r.db" + std::string(suffix)));
    fs::remove_all(dir_ / "out");
  }
  // The output folder of run_args' run `id`.
  fs::path out(int64_t id = 1) const { return dir_ / "out" / ("run_" + std::to_string(id)); }

  std::map<std::string, reports::ResultRow> results_by_model(reports::Store& store,
                                                             int64_t run_id) {
    std::map<std::string, reports::ResultRow> out;
    for (auto& r : store.results(run_id)) out[r.model + "/" + r.backend + "/" + r.mode] = r;
    return out;
  }

  fs::path dir_;
};

// --repeat n with --min-time-ms 0 takes exactly n samples in each of `workers` timing workers.
void expect_repeat_samples(const reports::ResultRow& perf, size_t repeat, size_t workers = 1) {
  EXPECT_EQ(perf.samples_ms.size(), repeat * workers) << perf.audit;
}

TEST_F(HarnessRun, EveryFaultBecomesItsStatusAndTheRunFinishes) {
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"m_ok", ""},           {"m_segv", "segv"},  {"m_abort", "abort"},
      {"m_hang", "hang"},     {"m_oom", "oom"},    {"m_compile", "compile_error"},
      {"m_run", "run_error"}, {"m_wrong", "wrong"}};
  std::string config;
  for (const auto& [model, fault] : faults) {
    add_model(model);
    if (!fault.empty()) config += " -c fault." + model + "=" + fault;
  }
  // A small memory limit: on a VM, first-touching a gigabyte of fresh pages can take seconds of
  // wall time, which raced the timeout and turned the oom case into a timeout.
  auto r = run_crucible(
      run_args("--backends faulty --mode accuracy --timeout 8 --memory-limit 256" + config));
  EXPECT_EQ(r.status, 1) << r.err;  // some models failed, and that is reported

  auto store = reports::Store::open(dir_ / "r.db");
  auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "complete");
  auto res = results_by_model(*store, runs[0].id);
  EXPECT_EQ(res.size(), faults.size());
  const std::map<std::string, std::string> expected = {
      {"m_ok", "pass"},         {"m_segv", "crash"},
      {"m_abort", "crash"},     {"m_hang", "timeout"},
      {"m_oom", "oom"},         {"m_compile", "fail_to_compile"},
      {"m_run", "fail_to_run"}, {"m_wrong", "fail_accuracy"}};
  for (const auto& [model, status] : expected) {
    ASSERT_TRUE(res.contains(model + "/faulty/accuracy")) << model;
    const auto& row = res[model + "/faulty/accuracy"];
    EXPECT_EQ(reports::status_name(row.status), status) << model << ": " << row.error;
    // The plugin's own version, from the worker's report: kept even when the worker died.
    EXPECT_EQ(row.backend_version, "test") << model;
  }
  EXPECT_NE(res["m_segv/faulty/accuracy"].error.find("SIGSEGV during run of faulty"),
            std::string::npos)
      << res["m_segv/faulty/accuracy"].error;
  EXPECT_NE(res["m_abort/faulty/accuracy"].error.find("SIGABRT"), std::string::npos);
  EXPECT_NE(res["m_compile/faulty/accuracy"].error.find("cannot lower op 'neg' for u8"),
            std::string::npos);
  EXPECT_NE(res["m_run/faulty/accuracy"].error.find("kernel launch failed"), std::string::npos);
  // The wrong answer is caught with its figures: one element off by exactly 1.
  auto acc = store->accuracy(res["m_wrong/faulty/accuracy"].id);
  ASSERT_EQ(acc.size(), 1u);
  EXPECT_FALSE(acc[0].passed);
  EXPECT_EQ(acc[0].mismatches, 32);
  EXPECT_EQ(acc[0].first_mismatch, 0);
  EXPECT_NEAR(acc[0].max_abs_err, 1.0, 1e-6);
  // The passing model's accuracy row is complete.
  auto ok = store->accuracy(res["m_ok/faulty/accuracy"].id);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_TRUE(ok[0].passed);
  EXPECT_EQ(ok[0].shape, "[4,8]");
  // CSV in dynamo's accuracy format.
  std::string csv = testing::read_all(out() / "faulty_accuracy.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "dev,name,batch_size,accuracy");
  EXPECT_NE(csv.find("cpu,m_segv,4,crash"), std::string::npos) << csv;

  // Each failure's reason reaches the console under its row, and the worker's log.
  // The model's row and the line after it.
  const auto row_and_reason = [&](const std::string& model) -> std::string {
    const size_t row = r.out.find("suite/" + model + " ");
    if (row == std::string::npos) return "";
    const size_t next = r.out.find('\n', r.out.find('\n', row) + 1);
    return r.out.substr(row, next == std::string::npos ? std::string::npos : next - row);
  };
  EXPECT_NE(row_and_reason("m_compile").find("    faulty: cannot lower op 'neg' for u8"),
            std::string::npos)
      << r.out;
  EXPECT_NE(row_and_reason("m_segv").find("SIGSEGV during run of faulty"), std::string::npos)
      << r.out;
  EXPECT_EQ(row_and_reason("m_ok").find("\n    "), std::string::npos) << r.out;
  EXPECT_NE(testing::read_all(out() / "logs" / "m_run.faulty.accuracy.log")
                .find("fail_to_run: faulty: kernel launch failed"),
            std::string::npos);
  // And `crucible results` lists them again, only the failures with --failed.
  auto listed = run_crucible("results " + std::to_string(runs[0].id) + " --failed --db " +
                             (dir_ / "r.db").string());
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(listed.out.find("suite/m_ok "), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("reason: faulty: cannot lower op 'neg' for u8"), std::string::npos)
      << listed.out;
  auto all = run_crucible("results " + std::to_string(runs[0].id) + " --format csv --db " +
                          (dir_ / "r.db").string());
  EXPECT_NE(all.out.find("suite/m_ok"), std::string::npos) << all.out;
  EXPECT_EQ(run_crucible("results 99 --db " + (dir_ / "r.db").string()).status, 2);
}

// `results --failed` on a run where nothing failed says so in a line, not a bare header.
TEST_F(HarnessRun, ResultsFailedOfARunWithNoFailureSaysSo) {
  add_model("m_a");
  add_model("m_b");
  ASSERT_EQ(run_crucible(run_args("--backends eager --mode accuracy")).status, 0);
  auto listed = run_crucible("results 1 --failed --db " + (dir_ / "r.db").string());
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(listed.out, "run 1: none of its 2 results failed\n");
  // CSV stays data: the header alone.
  listed = run_crucible("results 1 --failed --format csv --db " + (dir_ / "r.db").string());
  EXPECT_EQ(testing::count_lines(listed.out), 1) << listed.out;
}

// Output folders are one per store and run: two stores used from one folder get folders of their
// own, a folder named outright that holds another run's outputs is refused before the run is
// recorded, and "{run}" in the name gives each run its own.
TEST_F(HarnessRun, OutputFoldersAreOnePerStoreAndRun) {
  add_model("m_a");
  const std::string suite = "--suite " + (dir_ / "suite" / "suite.manifest").string() +
                            " --backends eager --plugin-path " + CRUCIBLE_TEST_PLUGIN_DIR;
  const std::string cd = "cd " + dir_.string() + " && ";
  fs::create_directories(dir_ / "a");
  fs::create_directories(dir_ / "b");
  for (const char* db : {"a/crucible.db", "b/crucible.db"}) {
    auto r = testing::run_command(cd + CRUCIBLE_BIN_DIR + "/crucible run " + suite + " --db " + db);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  // Both stores have a run 1; each wrote its own folder, which says whose it is.
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir_ / "crucible_out")) folders.push_back(e.path());
  ASSERT_EQ(folders.size(), 2u);
  for (const auto& f : folders) {
    EXPECT_EQ(f.filename().string().rfind("crucible-", 0), 0u) << f;
    EXPECT_TRUE(fs::exists(f / "run_1" / "eager_accuracy.csv")) << f;
  }
  EXPECT_NE(testing::read_all(folders[0] / "run_1" / ".crucible_run"),
            testing::read_all(folders[1] / "run_1" / ".crucible_run"));

  const std::string db = " --db " + (dir_ / "r.db").string();
  auto first = run_crucible("run " + suite + db + " -o " + (dir_ / "out").string());
  ASSERT_EQ(first.status, 0) << first.err;
  auto again = run_crucible("run " + suite + db + " -o " + (dir_ / "out").string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("holds the outputs of run 1 of"), std::string::npos) << again.err;
  EXPECT_EQ(reports::Store::open(dir_ / "r.db")->runs().size(), 1u);  // nothing recorded

  for (int i = 0; i < 2; ++i) {
    auto r = run_crucible("run " + suite + db + " -o " + (dir_ / "per_run" / "r{run}").string());
    ASSERT_EQ(r.status, 0) << r.err;
  }
  EXPECT_TRUE(fs::exists(dir_ / "per_run" / "r2" / "eager_accuracy.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "per_run" / "r3" / "eager_accuracy.csv"));

  // A run folder that cannot be made (under a regular file) fails the request, and the run row
  // made for its id goes again: exit 2, nothing recorded.
  std::ofstream(dir_ / "blocker") << "a file\n";
  auto blocked =
      run_crucible("run " + suite + db + " -o " + (dir_ / "blocker" / "r{run}").string());
  EXPECT_EQ(blocked.status, 2) << blocked.err;
  EXPECT_EQ(std::count(blocked.err.begin(), blocked.err.end(), '\n'), 1) << blocked.err;
  EXPECT_EQ(reports::Store::open(dir_ / "r.db")->runs().size(), 3u);

  // A claim left by a run killed while starting (its process gone) is taken over.
  fs::create_directories(dir_ / "stale");
  std::ofstream(dir_ / "stale" / ".crucible_run")
      << "a run of " << (dir_ / "r.db").string() << " still starting (pid 2147483000)\n";
  auto taken = run_crucible("run " + suite + db + " -o " + (dir_ / "stale").string());
  EXPECT_EQ(taken.status, 0) << taken.err;
  EXPECT_NE(testing::read_all(dir_ / "stale" / ".crucible_run").find("run 4 of"),
            std::string::npos);
}

// A --graph file that does not parse is the request's fault: exit 2 with file:line:col, and no
// run (nor database) is made.
TEST_F(HarnessRun, AGraphThatDoesNotParseIsRefusedBeforeTheRun) {
  std::ofstream(dir_ / "bad.graph") << "graph g\ninput x f32[2,3\n";
  auto r = run_crucible("run --graph " + (dir_ / "bad.graph").string() + " --db " +
                        (dir_ / "r.db").string() + " -o " + (dir_ / "out").string());
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("bad.graph:2:1: expected '('"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(HarnessRun, BothModesRecordSamplesSpeedupAndKernels) {
  add_model("m_a");
  add_model("m_skip", "skip=\"needs conv2d\"");
  add_model("m_x", "xfail=\"known wrong\"");
  auto r =
      run_crucible(run_args("--backends eager,faulty --mode both --repeat 4 --min-time-ms 0 "
                            "--warmup 1 -c fault.m_x=wrong"));
  EXPECT_EQ(r.status, 0) << r.err << r.out;  // skipped and expected failures do not fail the run
  // ...nor count as failed in `crucible runs` (its last column).
  auto runs = run_crucible("runs --format csv --db " + (dir_ / "r.db").string());
  ASSERT_EQ(runs.status, 0) << runs.err;
  const std::string row = runs.out.substr(runs.out.find('\n') + 1);
  EXPECT_EQ(row.substr(row.rfind(',') + 1), "0\n") << runs.out;
  auto store = reports::Store::open(dir_ / "r.db");
  auto run = store->runs().at(0);
  auto res = results_by_model(*store, run.id);
  const auto& perf = res["m_a/faulty/performance"];
  EXPECT_EQ(perf.status, reports::Status::kPass) << perf.error;
  expect_repeat_samples(perf, 4);
  // A speed-up, or the reason there is none (a clock gap that steal makes withholds it).
  EXPECT_EQ(testing::unexplained_missing_speedups(dir_ / "r.db"), "0\n");
  if (perf.speedup) {
    EXPECT_GT(*perf.speedup, 0);
  }
  ASSERT_TRUE(perf.peak_rss_mb.has_value());
  EXPECT_GT(*perf.peak_rss_mb, 1.0);
  EXPECT_TRUE(perf.compile_s.has_value());
  EXPECT_TRUE(perf.compile_warm_s.has_value());
  // Eager's speed-up over itself is exactly 1 and its kernels are named per op kind.
  const auto& eager = res["m_a/eager/performance"];
  // Every backend is bounded by what eager's worker measured, not by its own worker's report.
  ASSERT_TRUE(perf.roofline && eager.roofline);
  EXPECT_EQ(perf.roofline->triad_gbs, eager.roofline->triad_gbs);
  EXPECT_EQ(perf.roofline->peak_gflops, eager.roofline->peak_gflops);
  EXPECT_EQ(perf.roofline->min_bytes, eager.roofline->min_bytes);
  if (eager.speedup) {
    EXPECT_DOUBLE_EQ(*eager.speedup, 1.0);
  }
  auto kernels = store->kernels(eager.id);
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& k : kernels) {
    EXPECT_TRUE(k.name == "eager::mul" || k.name == "eager::neg") << k.name;
    EXPECT_EQ(k.calls, 1);  // per iteration
  }
  EXPECT_EQ(res["m_skip/eager/accuracy"].status, reports::Status::kSkipped);
  EXPECT_EQ(res["m_skip/eager/accuracy"].error, "needs conv2d");
  EXPECT_EQ(res["m_x/faulty/accuracy"].status, reports::Status::kXfail);
  // Not timed: it did not pass accuracy.
  EXPECT_EQ(res["m_x/faulty/performance"].status, reports::Status::kSkipped);
  std::string csv = testing::read_all(out() / "faulty_performance.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_"
            "peak_mem,dynamo_peak_mem,audited,audit_share,audit_coverage,gflops,flops_per_call,"
            "min_bytes_per_call,gbs,peak_gflops,triad_gbs,roofline_fraction,bound,memory_level,"
            "memory_level_gbs,samples_per_s");
  // A timed row's throughput is its batch over its median.
  const size_t m_a_row = csv.find("\ncpu,m_a,");
  ASSERT_NE(m_a_row, std::string::npos) << csv;
  std::vector<std::string> fields;
  std::stringstream line(csv.substr(m_a_row + 1, csv.find('\n', m_a_row + 1) - m_a_row - 1));
  for (std::string f; std::getline(line, f, ',');) fields.push_back(f);
  ASSERT_EQ(fields.size(), 23u) << csv;
  EXPECT_NEAR(std::stod(fields.back()), 1000.0 * std::stod(fields[2]) / std::stod(fields[4]),
              0.01 * std::stod(fields.back()))
      << csv;
  EXPECT_EQ(store->integrity_check(), "ok");

  // Each timed call's CPU time is taken beside its wall time, and Google Benchmark's JSON carries
  // it as cpu_time, in a unit its compare.py prints (a graph of microseconds in ns), with the
  // mean/median/stddev/cv aggregates and the run's threads.
  ASSERT_EQ(perf.cpu_ms.size(), perf.samples_ms.size());
  for (double c : perf.cpu_ms) EXPECT_GT(c, 0);
  const fs::path json = dir_ / "gbench.json";
  ASSERT_EQ(run_crucible("export-results " + std::to_string(run.id) + " --format gbench-json -o " +
                         json.string() + " --db " + (dir_ / "r.db").string())
                .status,
            0);
  auto py = testing::run_command(
      "/usr/bin/python3 -c 'import sys, json\n"
      "b = [x for x in json.load(open(sys.argv[1]))[\"benchmarks\"] if "
      "x[\"run_name\"] == \"suite/m_a/faulty\"]\n"
      "it = [x for x in b if x[\"run_type\"] == \"iteration\"]\n"
      "agg = {x[\"aggregate_name\"]: x for x in b if x[\"run_type\"] == \"aggregate\"}\n"
      "print(len(it), sorted(agg), it[0][\"time_unit\"], it[0][\"threads\"] >= 1, "
      "all(x[\"cpu_time\"] > 0 for x in it), agg[\"cv\"][\"aggregate_unit\"], "
      "it[0][\"real_time\"] > 100)' " +
      json.string());
  ASSERT_EQ(py.status, 0) << py.err;
  EXPECT_EQ(py.out, "4 ['cv', 'mean', 'median', 'stddev'] ns True True percentage True\n");
}

// Waits for a file another process creates; false after two minutes (a hang, not a timing).
bool wait_for_file(const fs::path& p) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!fs::exists(p)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// --min-time-ms: a graph of microseconds is sampled past --repeat until every backend was timed
// that long (capped at 100 x --repeat samples); 0 keeps exactly --repeat. The workers' OpenMP
// threads are bound one per core unless the environment says otherwise, and the run records it.
TEST_F(HarnessRun, MinTimeSamplesFastGraphsLongerAndThreadsAreBound) {
  add_model("m_a");
  auto r =
      run_crucible(run_args("--backends eager,faulty --mode performance --repeat 3 "
                            "--min-time-ms 40 --min-sample-ms 0.2 --warmup 1"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto store = reports::Store::open(dir_ / "r.db");
  const int64_t run_id = store->runs().at(0).id;
  auto res = results_by_model(*store, run_id);
  for (const std::string b : {"eager", "faulty"}) {
    const auto& perf = res["m_a/" + b + "/performance"];
    EXPECT_EQ(perf.status, reports::Status::kPass) << perf.error;
    const size_t cap = 300;  // 100 x --repeat
    EXPECT_GT(perf.samples_ms.size(), 3u) << b;
    EXPECT_LE(perf.samples_ms.size(), cap) << b;
    // Sampling stops once the slower-to-fill backend passes 40 ms, or at the cap. The worker's own
    // total, as its audit line states it: the calls of a sample are refitted as the timing goes,
    // so samples x the last calls-per-sample is not the time it held to --min-time-ms (39.3 ms
    // where it had passed 40 under ctest -j2).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(perf.audit, m, std::regex(R"(([0-9.]+) ms timed in all)")))
        << perf.audit;
    const double timed = std::stod(m[1]);
    EXPECT_TRUE(timed >= 40 || perf.samples_ms.size() >= 300u) << b << ": " << timed << " ms";
  }
  EXPECT_EQ(res["m_a/eager/performance"].samples_ms.size(),
            res["m_a/faulty/performance"].samples_ms.size());  // interleaved: one each per round
  const std::string launcher = testing::query_text(
      dir_ / "r.db", "SELECT launcher_json FROM runs WHERE id = " + std::to_string(run_id));
  if (std::getenv("OMP_PROC_BIND") == nullptr && std::getenv("OMP_PLACES") == nullptr &&
      std::getenv("GOMP_CPU_AFFINITY") == nullptr && std::getenv("KMP_AFFINITY") == nullptr) {
    EXPECT_NE(launcher.find("\"OMP_PROC_BIND\": \"close\""), std::string::npos) << launcher;
    EXPECT_NE(launcher.find("\"OMP_PLACES\": \"cores\""), std::string::npos) << launcher;
  }

  store.reset();
  start_anew();  // a store anew, and its run 1's outputs with it
  r = run_crucible(run_args("--backends eager --mode performance --repeat 3 --min-time-ms 0"));
  ASSERT_EQ(r.status, 0) << r.err;
  store = reports::Store::open(dir_ / "r.db");
  res = results_by_model(*store, store->runs().at(0).id);
  expect_repeat_samples(res["m_a/eager/performance"], 3);

  // --processes 3: three timing workers, each with its own log, their samples pooled.
  store.reset();
  start_anew();
  r =
      run_crucible(run_args("--backends eager,faulty --mode performance --repeat 2 --min-time-ms 0 "
                            "--processes 3"));
  ASSERT_EQ(r.status, 0) << r.err;
  store = reports::Store::open(dir_ / "r.db");
  res = results_by_model(*store, store->runs().at(0).id);
  for (const std::string b : {"eager", "faulty"}) {
    const auto& perf = res["m_a/" + b + "/performance"];
    EXPECT_EQ(perf.status, reports::Status::kPass) << perf.error;
    expect_repeat_samples(perf, 2, 3);
  }
  // A speed-up, or the reason there is none (2 samples a process: a clock gap that steal on a VM
  // makes in both withholds it).
  EXPECT_EQ(testing::unexplained_missing_speedups(dir_ / "r.db"), "0\n");
  // A timing worker per backend and process, each with its own log.
  for (const std::string b : {"eager", "faulty"}) {
    for (int p = 1; p <= 3; ++p) {
      EXPECT_TRUE(
          fs::exists(out() / "logs" / ("m_a." + b + ".timing.p" + std::to_string(p) + ".log")))
          << b << p;
    }
  }
  r = run_crucible(run_args("--backends eager --mode performance --processes 0"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--processes must be between 1 and 1000"), std::string::npos) << r.err;
}

TEST_F(HarnessRun, KilledRunLeavesCompleteRowsOnlyAndIsMarkedIncomplete) {
  // Every faulty worker stops inside run() at a gate (gate:DIR) until the test opens it, so the
  // harness is killed at known points: while the first model's worker runs (no result yet), and
  // after one and after three models' results were committed.
  const int kModels = 5;
  const fs::path gates = dir_ / "gates";
  std::string config;
  for (int i = 0; i < kModels; ++i) {
    add_model("m_" + std::to_string(i));
    config += " -c fault.m_" + std::to_string(i) + "=gate:" + gates.string();
  }
  // The plugin announces itself in the gates' folder: its workers' sandbox must let it write there.
  const std::string cmd = "CRUCIBLE_WORKER_WRITABLE=" + gates.string() + " exec " +
                          std::string(CRUCIBLE_BIN_DIR) + "/crucible " +
                          run_args("--backends eager,faulty --mode accuracy" + config) +
                          " >/dev/null 2>&1";
  const int kill_at_model[] = {0, 1, 3};
  for (int k : kill_at_model) {
    fs::remove_all(gates);
    fs::create_directories(gates);
    for (int i = 0; i < k; ++i) std::ofstream(gates / ("m_" + std::to_string(i) + ".go"));
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    const bool reached = wait_for_file(gates / ("m_" + std::to_string(k) + ".started"));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // Let the orphaned worker finish: it must not be able to write into the store.
    for (int i = 0; i < kModels; ++i) std::ofstream(gates / ("m_" + std::to_string(i) + ".go"));
    ASSERT_TRUE(reached) << "the worker of m_" << k << " never reached run()";
  }
  auto store = reports::Store::open(dir_ / "r.db");
  EXPECT_EQ(store->integrity_check(), "ok");
  auto runs = store->runs();
  ASSERT_EQ(runs.size(), std::size(kill_at_model));
  for (size_t n = 0; n < runs.size(); ++n) {
    const auto& run = runs[runs.size() - 1 - n];  // runs() lists the newest first
    const int k = kill_at_model[n];
    EXPECT_EQ(run.status, "incomplete") << "run " << run.id;
    auto rows = results_by_model(*store, run.id);
    for (int i = 0; i < kModels; ++i) {
      const std::string m = "m_" + std::to_string(i);
      // Models before the gate have both results, each with its accuracy rows (one transaction
      // per result); the gated model at most its eager one; later models nothing.
      EXPECT_EQ(rows.contains(m + "/faulty/accuracy"), i < k) << "run " << run.id << " " << m;
      if (i > k) {
        EXPECT_FALSE(rows.contains(m + "/eager/accuracy")) << m;
      }
      for (const char* b : {"eager", "faulty"}) {
        auto it = rows.find(m + "/" + b + "/accuracy");
        if (it == rows.end()) continue;
        EXPECT_EQ(it->second.status, reports::Status::kPass)
            << m << " " << b << ": " << it->second.error;
        EXPECT_EQ(store->accuracy(it->second.id).size(), 1u) << m << " " << b;
      }
    }
  }
}

// Ctrl-C in a terminal sends SIGINT to the whole foreground group: the harness and its workers.
// The run ends with 130 and `incomplete`, and keeps only the results that ended before it: no
// worker killed by the interrupt becomes a `crash` row, so `regressions` sees no pass -> crash.
// Interrupted at a known point (a faulty worker held at its gate during accuracy) and while the
// timing workers take turns.
TEST_F(HarnessRun, CtrlCStoresNoResultOfItsOwnMaking) {
  const int kModels = 3;
  const fs::path gates = dir_ / "gates";
  fs::create_directories(gates);
  std::string config;
  for (int i = 0; i < kModels; ++i) {
    add_model("m_" + std::to_string(i));
    config += " -c fault.m_" + std::to_string(i) + "=gate:" + gates.string();
  }
  const std::string run = "CRUCIBLE_WORKER_WRITABLE=" + gates.string() + " exec " +
                          std::string(CRUCIBLE_BIN_DIR) + "/crucible " +
                          run_args("--backends eager,faulty" + config) + " ";
  auto open_gate = [&](int i) { std::ofstream(gates / ("m_" + std::to_string(i) + ".go")); };
  open_gate(0);
  open_gate(1);
  open_gate(2);
  auto first = run_crucible(run_args("--backends eager,faulty --mode accuracy" + config),
                            "CRUCIBLE_WORKER_WRITABLE=" + gates.string());
  ASSERT_EQ(first.status, 0) << first.err;
  // Starts `run` (with these extra options) as a terminal's foreground job, its own group; waits
  // for `ready`, then presses Ctrl-C.
  auto interrupt = [&](const std::string& extra, const std::function<bool()>& ready) {
    const fs::path err = dir_ / "err.txt";
    const std::string cmd = run + extra + " >/dev/null 2>" + err.string();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!ready() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(-pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130)
        << status << ": " << testing::read_all(err);
    EXPECT_NE(testing::read_all(err).find("interrupted"), std::string::npos)
        << testing::read_all(err);
  };
  // At m_1's faulty accuracy worker, held at its gate.
  fs::remove(gates / "m_1.go");
  fs::remove(gates / "m_1.started");
  interrupt("--mode accuracy", [&] { return fs::exists(gates / "m_1.started"); });
  // While the first model is timed (its performance progress line is out).
  open_gate(1);
  interrupt("--mode both --repeat 3 --warmup 1", [&] {
    return testing::read_all(dir_ / "err.txt").find("performance") != std::string::npos;
  });

  auto store = reports::Store::open(dir_ / "r.db");
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& r : runs) EXPECT_EQ(r.status, r.id == 1 ? "complete" : "incomplete");
  for (const auto& r : runs) {
    for (const auto& row : store->results(r.id)) {
      EXPECT_TRUE(row.status == reports::Status::kPass || row.status == reports::Status::kSkipped)
          << "run " << r.id << " " << row.model << "/" << row.backend << "/" << row.mode << ": "
          << reports::status_name(row.status) << ": " << row.error;
    }
  }
  // The accuracy run kept m_0's results and none of the model it was interrupted in.
  const auto second = results_by_model(*store, 2);
  EXPECT_TRUE(second.contains("m_0/faulty/accuracy"));
  EXPECT_FALSE(second.contains("m_1/faulty/accuracy"));
  EXPECT_FALSE(second.contains("m_2/eager/accuracy"));
  auto regressions = run_crucible("regressions --db " + (dir_ / "r.db").string());
  EXPECT_EQ(regressions.status, 0) << regressions.out << regressions.err;
  EXPECT_EQ(regressions.out.find("crash"), std::string::npos) << regressions.out;
}

TEST_F(HarnessRun, CodegenInjectedBugsGetTheirStatuses) {
  // The tutorial's graphs on the real codegen backend, each planted bug caught as the field
  // expects.
  const std::string cache = "CRUCIBLE_CACHE_DIR=" + (dir_ / "cache").string();
  struct Case {
    std::string inject, model, status;
  } cases[] = {
      {"neg:times2", "neg_maximum_cat_f32", "fail_accuracy"},
      {"neg:no_cast", "neg_maximum_cat_u8", "fail_to_compile"},
      {"neg:crash", "neg_maximum_cat_f32", "crash"},
      {"maximum:offbyone", "neg_maximum_cat_f32", "fail_accuracy"},
      {"amax:bad_init", "add_add_mul_add", "pass"},  // no reduction there: the bug is never planted
      {"mean:bad_init", "linear_layernorm_relu", "fail_accuracy"},
  };
  for (const auto& c : cases) {
    start_anew();
    auto r = run_crucible("run --suite tutorial --only " + c.model +
                              " --backends codegen -c inject=" + c.inject + " --db " +
                              (dir_ / "r.db").string() + " --output-dir " + (dir_ / "out").string(),
                          cache);
    auto store = reports::Store::open(dir_ / "r.db");
    auto rows = store->results(store->runs().at(0).id);
    ASSERT_EQ(rows.size(), 1u) << c.inject << r.err;
    EXPECT_EQ(reports::status_name(rows[0].status), c.status) << c.inject << ": " << rows[0].error;
    EXPECT_EQ(r.status, c.status == "pass" ? 0 : 1) << c.inject;
  }
}

TEST_F(HarnessRun, BadRequestsFailBeforeAnyRunIsRecorded) {
  add_model("m_a");
  struct Case {
    std::string args, expected;
  } cases[] = {
      {"--backends nosuch", "backend 'nosuch': no crucible_backend_nosuch.so"},
      {"--mode fast", "--mode must be accuracy, performance, both, training or all, got 'fast'"},
      {"--only nothere", "--only nothere: no such model in the selected suites"},
      {"--filter '('", "--filter '(' is not a valid regular expression"},
      {"--shard 2/2", "--shard expects I/N with 0 <= I < N, got '2/2'"},
      {"--repeat 0", "--repeat must be at least 1"},
      {"--min-time-ms -5", "--min-time-ms must be between 0 and 3600000"},
      {"--exclude m_a", "no models selected"},
  };
  for (const auto& c : cases) {
    auto r = run_crucible(run_args(c.args));
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
  auto missing = run_crucible("run --suite nosuchsuite --db " + (dir_ / "r.db").string());
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("suite 'nosuchsuite': no nosuchsuite/suite.manifest in"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));  // nothing was recorded, not even an empty run
}

// A -c option a backend does not take is the request's error, said by the plugin itself before
// the run exists: each kind of mistake, on each built-in backend that takes options, and an
// unscoped key that reaches a backend it means nothing to. Good options still run.
TEST_F(HarnessRun, OptionsABackendRefusesFailTheRequestBeforeAnyRun) {
  add_model("m_a");
  struct Case {
    std::string args, expected;
  } cases[] = {
      {"--backends codegen -c injct=neg:times2",
       "backend 'codegen' refuses its options: codegen: unknown option -c injct=neg:times2"},
      {"--backends codegen -c inject=neg:triple",
       "codegen: -c inject=neg:triple is not OP:KIND[@NAME]"},
      {"--backends codegen -c fusion=maybe", "-c fusion=maybe"},
      {"--backends codegen -c max_fusion_size=-3", "must be a positive integer"},
      {"--backends eager -c eager:fusion=0", "eager: unknown option -c fusion=0"},
      {"--backends codegen,faulty -c codegen:chain_layout=nhcw", "expected auto, nhwc or nchw8c"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    auto r = run_crucible(run_args(c.args));
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));  // no run, not even an empty one
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // Options every backend takes run as before: codegen's planted bug is its model's status.
  auto good = run_crucible(run_args("--backends codegen --mode accuracy -c inject=neg:times2"));
  EXPECT_EQ(good.status, 1) << good.err;
  auto store = reports::Store::open(dir_ / "r.db");
  const auto rows = results_by_model(*store, store->runs().at(0).id);
  ASSERT_TRUE(rows.contains("m_a/codegen/accuracy"));
  EXPECT_EQ(rows.at("m_a/codegen/accuracy").status, reports::Status::kFailAccuracy);
}

// A third party's backend declares a load-time environment (the faulty plugin's "mood", with
// FAULTY_DECLARES=1): the harness probes its candidates as it does the peers' BLAS core, whatever
// the backend's name. A candidate that computes wrong results, or whose version shows another
// setting than it expects, is discarded with its reason; the one left runs the models, and the
// choice is in the header and the store. A named candidate is taken as it is; a name that is
// none is the request's error.
TEST_F(HarnessRun, ABackendsDeclaredLoadTimeChoiceIsProbedAndRecorded) {
  add_model("m_a");
  const std::string declares = "FAULTY_DECLARES=1";
  auto r = run_crucible(run_args("--backends faulty --mode accuracy"),
                        declares + " CRUCIBLE_TEST_LOAD_ENV_FAULT=env:wrong");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("mood.faulty: calm (mood=auto; probe ms: env discarded (fail_accuracy"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("grumpy discarded (fail_accuracy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("liar discarded (the backend ran calm instead))"), std::string::npos)
      << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(calm\[calm\] [0-9.]+)"))) << r.err;
  EXPECT_NE(testing::query_text(dir_ / "r.db", "SELECT launcher_json FROM runs")
                .find("\"mood.faulty\": \"calm (mood=auto"),
            std::string::npos);
  EXPECT_EQ(testing::query_text(dir_ / "r.db",
                                "SELECT DISTINCT backend_version FROM results WHERE "
                                "backend = 'faulty'"),
            "test; mood calm\n");

  start_anew();
  auto named =
      run_crucible(run_args("--backends faulty --mode accuracy -c faulty:mood=grumpy"), declares);
  EXPECT_EQ(named.status, 1) << named.out << named.err;  // grumpy computes wrong results
  EXPECT_NE(named.err.find("mood.faulty: grumpy (mood=grumpy)"), std::string::npos) << named.err;
  EXPECT_EQ(named.err.find("probe on"), std::string::npos) << named.err;  // nothing probed

  start_anew();
  auto bogus = run_crucible(run_args("--backends faulty -c faulty:mood=sulky"), declares);
  EXPECT_EQ(bogus.status, 2) << bogus.err;
  EXPECT_EQ(testing::count_lines(bogus.err), 1) << bogus.err;
  EXPECT_NE(bogus.err.find("-c faulty:mood=sulky: not a choice on this machine (want auto, env, "
                           "calm, grumpy, liar)"),
            std::string::npos)
      << bogus.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));
  // Undeclared, the same plugin is run as it is: no probe, no entry.
  start_anew();
  auto plain = run_crucible(run_args("--backends faulty --mode accuracy"));
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.err.find("mood."), std::string::npos) << plain.err;
}

TEST_F(HarnessRun, UnloadablePluginIsFailToLoadPerModelAndTheOthersRun) {
  add_model("m_a");
  add_model("m_b");
  // One plugin the workers refuse (ABI 999), one whose file the harness refuses (truncated), one
  // that exits the worker with status 0 mid-run.
  const std::string wrong_abi = std::string(CRUCIBLE_TEST_PLUGIN_DIR) + "/wrong_abi_plugin.so";
  const fs::path truncated = dir_ / "truncated.so";
  std::ofstream(truncated, std::ios::binary)
      << testing::read_all(std::string(CRUCIBLE_BIN_DIR) +
                           "/../lib/crucible/crucible_backend_eager.so")
             .substr(0, 200);
  const std::string backends = "eager," + wrong_abi + "," + truncated.string() + ",exit0";
  auto r =
      run_crucible(run_args("--backends " + backends +
                            " --mode both --repeat 2 --min-time-ms 0 --warmup 0 --timeout 60"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("backend '" + truncated.string() +
                       "' cannot be loaded, recorded as fail_to_load: " + truncated.string() +
                       ": not a loadable shared library (truncated"),
            std::string::npos)
      << r.err;

  auto store = reports::Store::open(dir_ / "r.db");
  auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "complete");
  auto res = results_by_model(*store, runs[0].id);
  EXPECT_EQ(res.size(), 2u * 4u * 2u);  // models x backends x modes
  for (const std::string m : {"m_a", "m_b"}) {
    for (const std::string mode : {"accuracy", "performance"}) {
      const auto& eager = res[m + "/eager/" + mode];
      EXPECT_EQ(eager.status, reports::Status::kPass) << m << " " << mode << ": " << eager.error;
      const auto& abi = res[m + "/" + wrong_abi + "/" + mode];
      EXPECT_EQ(abi.status, reports::Status::kFailToLoad) << m << " " << mode;
      EXPECT_NE(abi.error.find("wrong_abi_plugin.so: plugin ABI version 999 does not match"),
                std::string::npos)
          << abi.error;
      const auto& cut = res[m + "/" + truncated.string() + "/" + mode];
      EXPECT_EQ(cut.status, reports::Status::kFailToLoad) << m << " " << mode;
      EXPECT_NE(cut.error.find("truncated.so: not a loadable shared library (truncated"),
                std::string::npos)
          << cut.error;
    }
    const auto& exited = res[m + "/exit0/accuracy"];
    EXPECT_EQ(exited.status, reports::Status::kFailToRun) << exited.error;
    EXPECT_NE(exited.error.find("worker exited with status 0 during run of exit0"),
              std::string::npos)
        << exited.error;
  }
  // The eager timings were still taken, with the unloadable plugins out of the timing worker.
  expect_repeat_samples(res["m_a/eager/performance"], 2);

  // Performance only: the worker-side load failure goes through the profile and timing workers.
  auto perf = run_crucible(
      run_args("--backends eager," + wrong_abi + " --mode performance " + "--repeat 2 --warmup 0"));
  EXPECT_EQ(perf.status, 1) << perf.err;
  auto runs2 = store->runs();
  ASSERT_EQ(runs2.size(), 2u);
  const int64_t second = runs2[0].id == runs[0].id ? runs2[1].id : runs2[0].id;
  auto res2 = results_by_model(*store, second);
  EXPECT_EQ(res2["m_a/eager/performance"].status, reports::Status::kPass)
      << res2["m_a/eager/performance"].error;
  EXPECT_EQ(res2["m_a/" + wrong_abi + "/performance"].status, reports::Status::kFailToLoad);
}

// A backend more accurate than eager (off it, but nearer fp64) passes the accuracy rule through
// its fp64 step. Performance alone makes eager's reference only; the hand-off of the timing
// worker then needs the fp64 one, which is made when a verdict needs it: the backend passes.
TEST_F(HarnessRun, AHandOffThatNeedsFp64GetsTheFullReference) {
  std::ofstream(dir_ / "suite" / "m_exact.graph")
      << "graph m_exact(%x: f32[64]) {\n  param %big: f32[64] = full(value=10000000)\n"
         "  %a = add(%x, %big)\n  %b = sub(%a, %big)\n  return %b\n}\n";
  std::ofstream(dir_ / "suite" / "suite.manifest") << "model m_exact graph=m_exact.graph\n";
  auto r =
      run_crucible(run_args("--backends faulty --mode performance --repeat 2 --min-time-ms 0 -c "
                            "fault.m_exact=fp64"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  auto res = results_by_model(*store, store->runs().at(0).id);
  EXPECT_EQ(res["m_exact/faulty/performance"].status, reports::Status::kPass)
      << res["m_exact/faulty/performance"].error;
  // And in accuracy mode the same backend passes by the same step, not by allclose.
  r = run_crucible(run_args("--backends faulty --mode accuracy -c fault.m_exact=fp64"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// The reference is the registry's interpreter in a worker that loads no plugin: an eager plugin
// shadowed by --plugin-path (here, one that does not load) fails eager's own results, never the
// reference other backends are judged against.
TEST_F(HarnessRun, AShadowedEagerPluginFailsEagerAloneNotTheReference) {
  add_model("m_a");
  const fs::path plugins = dir_ / "plugins";
  fs::create_directories(plugins);
  std::ofstream(plugins / "crucible_backend_eager.so") << "not a library\n";
  auto r = run_crucible("run --suite " + (dir_ / "suite" / "suite.manifest").string() + " --db " +
                        (dir_ / "r.db").string() + " --output-dir " + (dir_ / "out").string() +
                        " --plugin-path " + plugins.string() + " --plugin-path " +
                        CRUCIBLE_TEST_PLUGIN_DIR + " --backends eager,faulty");
  EXPECT_EQ(r.status, 1) << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  auto res = results_by_model(*store, store->runs().at(0).id);
  EXPECT_EQ(res["m_a/eager/accuracy"].status, reports::Status::kFailToLoad);
  EXPECT_NE(res["m_a/eager/accuracy"].error.find((plugins / "crucible_backend_eager.so").string() +
                                                 ": not a loadable shared library (not an ELF"),
            std::string::npos)
      << res["m_a/eager/accuracy"].error;
  EXPECT_EQ(res["m_a/faulty/accuracy"].status, reports::Status::kPass)
      << res["m_a/faulty/accuracy"].error;
}

// crucible-<pid>-* groups under `parent` whose crucible process is gone: left behind.
std::vector<std::string> leftover_groups(const fs::path& parent) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("crucible-")) continue;
    const pid_t pid = std::atoi(name.substr(9).c_str());
    if (::kill(pid, 0) != 0 && errno == ESRCH) out.push_back(name);
  }
  return out;
}

TEST_F(HarnessRun, MemoryLimitIsResidentMemoryInACgroup) {
  const MemoryLimitSupport& support = memory_limit_support();
  if (support.kind == MemoryLimitKind::kAddressSpace) {
    GTEST_SKIP() << "no memory cgroup can be made here: " << support.why_not;
  }
  add_model("m_ok");
  add_model("m_oom");      // touches memory until stopped
  add_model("m_reserve");  // 2 GB of address space, never touched: not resident
#ifdef CRUCIBLE_SANITIZED
  // ASan writes the shadow of what malloc hands out: the 2 GB reserved are 256 MB resident, and
  // the worker peaked at 272 MB. Still far below the 2 GB, so address space is not what counts.
  const std::string limit = "768";
#else
  const std::string limit = "200";
#endif
  auto r = run_crucible(run_args("--backends faulty --mode accuracy --timeout 60 --memory-limit " +
                                 limit + " -c fault.m_oom=oom -c fault.m_reserve=reserve_mb:2048"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.find("RLIMIT_AS"), std::string::npos) << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  auto res = results_by_model(*store, store->runs().at(0).id);
  EXPECT_EQ(res["m_ok/faulty/accuracy"].status, reports::Status::kPass)
      << res["m_ok/faulty/accuracy"].error;
  EXPECT_EQ(res["m_reserve/faulty/accuracy"].status, reports::Status::kPass)
      << res["m_reserve/faulty/accuracy"].error;
  const auto& oom = res["m_oom/faulty/accuracy"];
  EXPECT_EQ(oom.status, reports::Status::kOom) << oom.error;
  EXPECT_NE(
      oom.error.find("resident-memory limit " + limit + " MB, killed by the kernel's OOM killer"),
      std::string::npos)
      << oom.error;
  EXPECT_EQ(leftover_groups(support.parent), std::vector<std::string>{});
}

TEST_F(HarnessRun, SmallModelsPassAtTheLowestAcceptedLimit) {
  // The tutorial's oneDNN linear model and sin_cos on eager and (compiling) codegen need some 15 MB
  // resident, and the compiler some 30 MB more. At the floor (64 MB in a cgroup) they pass; as an
  // address-space limit, 64 MB left the compiler "virtual memory exhausted".
  CRUCIBLE_SKIP_WHEN_SANITIZED("the floor is a plain worker's; ASan's shadow alone exceeds it");
  const int64_t floor = memory_limit_floor_mb(memory_limit_support().kind);
  const std::string cache = "CRUCIBLE_CACHE_DIR=" + (dir_ / "cache").string();
  auto r = run_crucible(
      "run --suite tutorial --only linear_layernorm_relu,sin_cos --backends "
      "eager,codegen --memory-limit " +
          std::to_string(floor) + " --db " + (dir_ / "r.db").string() + " --output-dir " +
          (dir_ / "out").string(),
      cache);
  EXPECT_EQ(r.status, 0) << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  auto rows = store->results(store->runs().at(0).id);
  EXPECT_EQ(rows.size(), 4u);
  for (const auto& row : rows)
    EXPECT_EQ(row.status, reports::Status::kPass) << row.model << " " << row.error;
}

TEST_F(HarnessRun, MemoryLimitBelowWhatAWorkerNeedsIsRefused) {
  add_model("m_a");
  const MemoryLimitKind kind = memory_limit_support().kind;
  const int64_t floor = memory_limit_floor_mb(kind);
  for (int64_t mb : {int64_t{1}, int64_t{50}, floor - 1}) {
    auto r = run_crucible(run_args("--memory-limit " + std::to_string(mb)));
    EXPECT_EQ(r.status, 2) << mb;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--memory-limit " + std::to_string(mb) + " MB is below the " +
                         std::to_string(floor) + " MB a worker needs"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));
#ifdef CRUCIBLE_SANITIZED
  // A sanitizer's shadow memory does not fit under RLIMIT_AS: the fallback is refused, one line.
  auto san = run_crucible(run_args("--memory-limit 256"), "CRUCIBLE_NO_CGROUPS=1");
  EXPECT_EQ(san.status, 2);
  EXPECT_EQ(testing::count_lines(san.err), 1) << san.err;
  EXPECT_NE(
      san.err.find("--memory-limit needs a memory cgroup in a crucible built with -fsanitize="),
      std::string::npos)
      << san.err;
  return;
#endif
  // Under the RLIMIT_AS fallback, the floor is the address space's, and the run says once what
  // the limit means there.
  auto low = run_crucible(run_args("--memory-limit 100"), "CRUCIBLE_NO_CGROUPS=1");
  EXPECT_EQ(low.status, 2);
  EXPECT_NE(low.err.find("below the 128 MB a worker needs to start and compile here (the limit "
                         "is on address space (RLIMIT_AS))"),
            std::string::npos)
      << low.err;
  add_model("m_reserve");
  auto fallback = run_crucible(
      run_args("--memory-limit 256 -c fault.m_reserve=reserve_mb:2048 --backends faulty"),
      "CRUCIBLE_NO_CGROUPS=1");
  EXPECT_EQ(fallback.status, 1) << fallback.err;
  const std::string note =
      "crucible run: --memory-limit limits each worker's address space (RLIMIT_AS), not its "
      "resident memory, as no memory cgroup can be made here: CRUCIBLE_NO_CGROUPS is set\n";
  const size_t at = fallback.err.find(note);
  EXPECT_NE(at, std::string::npos) << fallback.err;
  EXPECT_EQ(fallback.err.find(note, at + 1), std::string::npos) << "said more than once";
  auto store = reports::Store::open(dir_ / "r.db");
  auto res = results_by_model(*store, store->runs().at(0).id);
  EXPECT_EQ(res["m_a/faulty/accuracy"].status, reports::Status::kPass)
      << res["m_a/faulty/accuracy"].error;
  // Untouched address space counts against RLIMIT_AS: that is what the cgroup limit fixes.
  EXPECT_EQ(res["m_reserve/faulty/accuracy"].status, reports::Status::kOom);
  EXPECT_NE(res["m_reserve/faulty/accuracy"].error.find("address-space limit 256 MB"),
            std::string::npos)
      << res["m_reserve/faulty/accuracy"].error;
}

TEST_F(HarnessRun, NotADatabaseIsOneClearError) {
  add_model("m_a");
  std::ofstream(dir_ / "r.db")
      << "this is not sqlite, just some text that is long enough to have a header....";
  auto r = run_crucible(run_args(""));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("r.db: not a crucible database"), std::string::npos) << r.err;
}

// SQLite says "unable to open database file" for each of these; the user is told which it is, in
// one line, and nothing is made.
TEST_F(HarnessRun, ADatabaseThatCannotBeOpenedSaysWhy) {
  add_model("m_a");
  const auto run_on = [&](const fs::path& db) {
    return run_crucible("run --suite " + (dir_ / "suite" / "suite.manifest").string() + " --db " +
                        db.string() + " --output-dir " + (dir_ / "out").string());
  };
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {dir_ / "no_such_folder" / "r.db", "cannot open database: the folder " +
                                             (dir_ / "no_such_folder").string() +
                                             " does not exist"},
      {dir_, "cannot open database: it is a directory, not a database file"},
      {dir_ / "suite" / "suite.manifest" / "r.db", "is not a folder"}};
  for (const auto& [db, says] : cases) {
    SCOPED_TRACE(db.string());
    auto r = run_on(db);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "no_such_folder"));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // The readers say the same of a directory.
  auto runs = run_crucible("runs --db " + dir_.string());
  EXPECT_EQ(runs.status, 2);
  EXPECT_NE(runs.err.find("a directory, not a database file"), std::string::npos) << runs.err;
}

}  // namespace
}  // namespace crucible
