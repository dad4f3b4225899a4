// The parent's side of a worker: status names, the report parser (round trip, truncation, garbage)
// and finalize_job's mapping from how a worker ended to one status per backend.
#include "job_outcome.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "crucible/reports/status.h"
#include "worker_report.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using reports::Status;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("crucible_outcome_" + std::to_string(getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

TEST(Status, EveryStatusHasOneNameThatParsesBack) {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(Status::kXfail); ++i) {
    const auto s = static_cast<Status>(i);
    const std::string_view name = reports::status_name(s);
    EXPECT_NE(name, "unknown") << i;
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    EXPECT_EQ(reports::status_from_name(name), s) << name;
  }
  EXPECT_EQ(reports::status_name(Status::kFailToCompile), "fail_to_compile");
  EXPECT_EQ(reports::status_from_name("Pass"), std::nullopt);
  EXPECT_EQ(reports::status_from_name(""), std::nullopt);
  EXPECT_TRUE(reports::is_success(Status::kXfail));
  EXPECT_TRUE(reports::is_success(Status::kSkipped));
  EXPECT_FALSE(reports::is_success(Status::kEagerTwoRunsDiffer));
  EXPECT_FALSE(reports::is_success(Status::kOom));
}

reports::ResultRecord sample_result() {
  auto r = reports::make_result("tut", "m|odel\nx", "codegen", "performance", 4);
  r.status = Status::kFailAccuracy;
  r.error = "max error 1e-2\tat index 3";
  r.samples_ms = {1.5, 0.25};
  r.compile_s = 0.125;
  r.peak_rss_mb = 64;
  reports::OutputAccuracy a;
  a.index = 0;
  a.dtype = "f32";
  a.shape = "[2,3]";
  a.max_abs_err = 0.5;
  a.mismatches = 2;
  a.first_mismatch = 1;
  r.accuracy.push_back(a);
  r.kernels.push_back({"cpp_fused_add_0", 3, 4500, std::nullopt});
  return r;
}

TEST(WorkerReport, RoundTripsEveryField) {
  TempDir dir;
  {
    ReportWriter w(dir / "r");
    w.phase("compile", "codegen");
    w.result(sample_result());
    w.reply(1, "out\nput", "err");
  }
  const WorkerReport rep = read_report(dir / "r");
  EXPECT_EQ(rep.phase, "compile");
  EXPECT_EQ(rep.phase_backend, "codegen");
  ASSERT_EQ(rep.results.size(), 1u);
  const auto& r = rep.results[0];
  const auto want = sample_result();
  EXPECT_EQ(r.model, want.model);
  EXPECT_EQ(r.status, Status::kFailAccuracy);
  EXPECT_EQ(r.error, want.error);
  EXPECT_EQ(r.samples_ms, want.samples_ms);
  EXPECT_EQ(r.compile_s, want.compile_s);
  EXPECT_EQ(r.peak_rss_mb, want.peak_rss_mb);
  ASSERT_EQ(r.accuracy.size(), 1u);
  EXPECT_EQ(r.accuracy[0].shape, "[2,3]");
  EXPECT_EQ(r.accuracy[0].mismatches, 2);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].total_ns, 4500);
  ASSERT_TRUE(rep.reply.has_value());
  EXPECT_EQ(rep.reply->exit_code, 1);
  EXPECT_EQ(rep.reply->out, "out\nput");
}

TEST(WorkerReport, TruncatedOrGarbledRecordsAreDroppedWhole) {
  TempDir dir;
  {
    ReportWriter w(dir / "r");
    w.phase("run", "codegen");
    w.result(sample_result());
  }
  std::string text;
  {
    std::ifstream in(dir / "r");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Cut the record anywhere before its end line: no result, never a half-filled one.
  const size_t end = text.rfind("end");
  ASSERT_NE(end, std::string::npos);
  for (size_t cut = 0; cut < end; cut += 7) {
    std::ofstream(dir / "cut") << text.substr(0, cut);
    EXPECT_TRUE(read_report(dir / "cut").results.empty()) << "cut at " << cut;
  }
  // An unknown status name is garbage, not a status.
  std::string bad = text;
  const size_t at = bad.find("fail_accuracy");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 13, "fail_acurracy");
  std::ofstream(dir / "bad") << bad;
  EXPECT_TRUE(read_report(dir / "bad").results.empty());
  EXPECT_TRUE(read_report(dir / "missing").results.empty());
}

// A backend's declaration reaches the parent whole: every field of a load-time choice (a variable
// set, one unset, probe options, a multi-line probe graph) and of a bisection; one cut before its
// end line is not there at all.
TEST(WorkerReport, DeclarationsRoundTripAndACutOneIsDropped) {
  TempDir dir;
  plugin::Declaration d;
  d.load_env =
      plugin::LoadEnvChoice{"core",
                            "T_DEFAULT",
                            "core ",
                            "T_REASON",
                            "graph g(%x: f32[2]) {\n  %y = neg(%x)\n  return %y\n}\n",
                            {{"linear", "aten"}},
                            {{"env", {}, ""}, {"Fast", {{"A", "Fast"}, {"B", {}}}, "Fast"}}};
  d.bisection.passes = {{"fusion", "fusion", "off", {}, false},
                        {"decompose(silu)", "no_decompose", "silu", {"silu", "mul"}, true}};
  d.bisection.node_fallback_key = "ref_nodes";
  d.bisection.code_file = "code.cpp";
  {
    ReportWriter w(dir / "r");
    w.declared("b\tone", d);
    w.declared("plain", {});
  }
  const WorkerReport rep = read_report(dir / "r");
  ASSERT_EQ(rep.declarations.size(), 2u);
  const plugin::Declaration& got = rep.declarations.at("b\tone");
  ASSERT_TRUE(got.load_env.has_value());
  const plugin::LoadEnvChoice& l = *got.load_env;
  EXPECT_EQ(l.option, "core");
  EXPECT_EQ(l.default_from, "T_DEFAULT");
  EXPECT_EQ(l.version_fact, "core ");
  EXPECT_EQ(l.reason_var, "T_REASON");
  EXPECT_EQ(l.probe_graph, d.load_env->probe_graph);
  EXPECT_EQ(l.probe_config, d.load_env->probe_config);
  ASSERT_EQ(l.candidates.size(), 2u);
  EXPECT_TRUE(l.candidates[0].env.empty());
  EXPECT_EQ(l.candidates[1].name, "Fast");
  EXPECT_EQ(l.candidates[1].expect, "Fast");
  EXPECT_EQ(l.candidates[1].env, d.load_env->candidates[1].env);
  ASSERT_EQ(got.bisection.passes.size(), 2u);
  EXPECT_EQ(got.bisection.passes[1].name, "decompose(silu)");
  EXPECT_EQ(got.bisection.passes[1].value, "silu");
  EXPECT_EQ(got.bisection.passes[1].ops, (std::vector<std::string>{"silu", "mul"}));
  EXPECT_TRUE(got.bisection.passes[1].only_when_set);
  EXPECT_FALSE(got.bisection.passes[0].only_when_set);
  EXPECT_EQ(got.bisection.node_fallback_key, "ref_nodes");
  EXPECT_EQ(got.bisection.code_file, "code.cpp");
  EXPECT_FALSE(rep.declarations.at("plain").load_env.has_value());
  EXPECT_TRUE(rep.declarations.at("plain").bisection.passes.empty());

  std::string text;
  {
    std::ifstream in(dir / "r");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t end = text.find("\nend\n");
  ASSERT_NE(end, std::string::npos);
  for (size_t cut = 0; cut <= end; cut += 5) {
    std::ofstream(dir / "cut") << text.substr(0, cut);
    EXPECT_TRUE(read_report(dir / "cut").declarations.empty()) << "cut at " << cut;
  }
}

struct Case {
  const char* what;
  ChildOutcome outcome;
  std::string phase;
  Status want;
};

TEST(FinalizeJob, HowTheWorkerEndedBecomesOneStatusPerBackend) {
  TempDir dir;
  std::ofstream(dir / "log") << "some line\nterminate called after std::bad_alloc\n";
  std::ofstream(dir / "quiet.log") << "nothing to see\n";
  WorkerJob job;
  job.job = "timing";
  job.suite = "s";
  job.model = "m";
  job.backends = {"eager", "codegen"};
  ChildLimits limits;
  limits.timeout_s = 5;
  limits.memory_limit_mb = 100;
  auto outcome = [](auto f) {
    ChildOutcome o;
    f(o);
    return o;
  };
  const Case cases[] = {
      {"timeout", outcome([](ChildOutcome& o) { o.timed_out = true; }), "run", Status::kTimeout},
      {"oom exit code", outcome([](ChildOutcome& o) {
         o.exited = true;
         o.exit_code = kWorkerExitOom;
       }),
       "run", Status::kOom},
      {"cgroup oom kill", outcome([](ChildOutcome& o) {
         o.signal = SIGKILL;
         o.memory_cgroup = o.oom_killed = true;
       }),
       "run", Status::kOom},
      {"SIGKILL in a cgroup without an oom kill is a crash", outcome([](ChildOutcome& o) {
         o.signal = SIGKILL;
         o.memory_cgroup = true;
       }),
       "run", Status::kCrash},
      {"SIGKILL while the machine's OOM killer ended processes", outcome([](ChildOutcome& o) {
         o.signal = SIGKILL;
         o.machine_oom_kills = 1;
       }),
       "run", Status::kOom},
      {"SIGKILL in a cgroup that saw no kill while the machine's did", outcome([](ChildOutcome& o) {
         o.signal = SIGKILL;
         o.memory_cgroup = true;
         o.machine_oom_kills = 1;
       }),
       "run", Status::kCrash},
      {"a timeout while the machine's OOM killer ran", outcome([](ChildOutcome& o) {
         o.timed_out = true;
         o.signal = SIGKILL;
         o.machine_oom_kills = 1;
       }),
       "run", Status::kTimeout},
      {"a segfault while the machine's OOM killer ran", outcome([](ChildOutcome& o) {
         o.signal = SIGSEGV;
         o.machine_oom_kills = 1;
       }),
       "run", Status::kCrash},
      {"SIGKILL near RLIMIT_AS", outcome([](ChildOutcome& o) {
         o.signal = SIGKILL;
         o.peak_rss_mb = 95;
       }),
       "run", Status::kOom},
      {"segfault while running", outcome([](ChildOutcome& o) { o.signal = SIGSEGV; }), "run",
       Status::kCrash},
      {"segfault while loading", outcome([](ChildOutcome& o) { o.signal = SIGSEGV; }), "load",
       Status::kFailToLoad},
      {"segfault in the eager reference", outcome([](ChildOutcome& o) { o.signal = SIGSEGV; }),
       "eager_run", Status::kEagerFailToRun},
      {"error exit", outcome([](ChildOutcome& o) {
         o.exited = true;
         o.exit_code = 1;
       }),
       "compile", Status::kFailToRun},
  };
  for (const Case& c : cases) {
    WorkerReport rep;
    rep.phase = c.phase;
    rep.phase_backend = "codegen";
    const auto out = finalize_job(job, c.outcome, rep, dir / "quiet.log", limits);
    ASSERT_EQ(out.size(), 2u) << c.what;
    for (const auto& r : out) {
      EXPECT_EQ(reports::status_name(r.status), reports::status_name(c.want)) << c.what;
      EXPECT_EQ(r.mode, "performance");
      EXPECT_FALSE(r.error.empty()) << c.what;
    }
  }
  // An abort with bad_alloc in the log is memory, not a crash.
  WorkerReport rep;
  rep.phase = "run";
  auto aborted = outcome([](ChildOutcome& o) { o.signal = SIGABRT; });
  EXPECT_EQ(finalize_job(job, aborted, rep, dir / "log", limits)[0].status, Status::kOom);
  EXPECT_EQ(finalize_job(job, aborted, rep, dir / "quiet.log", limits)[0].status, Status::kCrash);
}

TEST(FinalizeJob, ReportedResultsAreKeptAndAnOomKillRelabelsOnlyFailures) {
  TempDir dir;
  WorkerJob job;
  job.job = "outputs";
  job.backends = {"eager", "codegen"};
  WorkerReport rep;
  auto passed = reports::make_result("s", "m", "eager", "accuracy", 1);
  passed.status = Status::kPass;
  auto failed = reports::make_result("s", "m", "codegen", "accuracy", 1);
  failed.status = Status::kFailToCompile;
  failed.error = "c++ was killed";
  rep.results = {failed, passed};  // any order: matched by backend
  ChildOutcome o;
  o.exited = true;
  o.exit_code = 0;
  auto out = finalize_job(job, o, rep, dir / "none.log", {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].backend, "eager");
  EXPECT_EQ(out[0].status, Status::kPass);
  EXPECT_EQ(out[1].status, Status::kFailToCompile);
  o.memory_cgroup = o.oom_killed = true;
  ChildLimits limit_64;
  limit_64.memory_limit_mb = 64;
  out = finalize_job(job, o, rep, dir / "none.log", limit_64);
  EXPECT_EQ(out[0].status, Status::kPass);
  EXPECT_EQ(out[1].status, Status::kOom);
  EXPECT_NE(out[1].error.find("fail_to_compile: c++ was killed"), std::string::npos)
      << out[1].error;
}

}  // namespace
}  // namespace crucible
