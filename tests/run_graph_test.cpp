// `crucible run-graph` end to end on the real binary and real plugins: its normal output, and every
// way a plugin can misbehave (hang, crash, abort, exit) contained as one line and exit status 1.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cli_util.h"

namespace crucible {
namespace {

using testing::count_lines;
using testing::run_crucible;

const std::string kGraph = std::string(CRUCIBLE_SOURCE_DIR) + "/suites/tutorial/sin_cos.graph";
const std::string kPlugins = std::string(" --plugin-path ") + CRUCIBLE_TEST_PLUGIN_DIR;

// Eager's f32 sin and cos run glibc's 16-lane libmvec where crucible is built for AVX-512 and
// scalar libm elsewhere: each is deterministic, and they differ in the last bit of some elements
// (the fifth value printed among them).
#if defined(__AVX512F__)
const std::string kSinCosFnv = "a0c959371da8b37d", kSinCosFifth = "-0\\.0197868";
#else
const std::string kSinCosFnv = "71cf3b39afb0f362", kSinCosFifth = "-0\\.0197869";
#endif

TEST(RunGraph, NormalOutputIsUnchanged) {
  auto r = run_crucible("run-graph " + kGraph + " --backend eager --threads 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::regex expected("graph sin_cos \\(" + kGraph +
                            "\\) on eager 0\\.1\\.0, seed 0, 1 threads: compile [0-9.]+ ms, run "
                            "[0-9.]+ ms, peak tensor storage "
                            "[0-9.]+ MB, peak resident [0-9.]+ MB\n"
                            "  output 0 %out: f32\\[10,10\\] sum=48\\.454 fnv=" +
                            kSinCosFnv + " \\[0\\.0244245, -0\\.209332, 1\\.89467, 0\\.801948, " +
                            kSinCosFifth + ", -0\\.0498796, \\.\\.\\.\\]\n");
  EXPECT_TRUE(std::regex_match(r.out, expected)) << r.out;

  auto prof = run_crucible("run-graph " + kGraph + " --backend eager --profile --seed 3");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_NE(prof.out.find(", seed 3, "), std::string::npos) << prof.out;
  EXPECT_NE(prof.out.find("  kernel                              calls     total ms\n"),
            std::string::npos)
      << prof.out;
  EXPECT_NE(prof.out.find("  eager::sin "), std::string::npos) << prof.out;
}

// Eager is the reference: it computes the same whatever OpenMP settings it is started under. With
// OMP_MAX_ACTIVE_LEVELS=0 every region ran on one thread while omp_get_max_threads() said 2, and
// oneDNN left the other thread's half of a GEMM unwritten: eager and codegen agreed on the wrong
// answer, and accuracy passed. Every run sets its count through use_openmp_threads, which turns
// regions back on.
TEST(RunGraph, EagerComputesTheSameUnderAnyOpenMpSetting) {
  const auto dir = testing::fresh_test_dir("run_graph_omp");
  std::ofstream(dir / "lin.graph")
      << "graph lin(%x: f32[64,256]) {\n  param %w: f32[256,256] = randn(seed=3, std=0.06)\n"
         "  %y = linear(%x, %w)\n  %z = relu(%y)\n  return %z\n}\n";
  auto output = [&](const std::string& env, const std::string& backend) {
    auto r = run_crucible(
        "run-graph " + (dir / "lin.graph").string() + " --backend " + backend + " --threads 2",
        env);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out.substr(r.out.find('\n') + 1);  // the outputs, without the timing line
  };
  for (const std::string backend : {"eager", "codegen"}) {
    const std::string want = output("", backend);
    for (const std::string env :
         {"OMP_MAX_ACTIVE_LEVELS=0", "OMP_DYNAMIC=true", "OMP_NUM_THREADS=1", "OMP_NESTED=false"})
      EXPECT_EQ(output(env, backend), want) << backend << " under " << env;
  }
}

// Each misbehaving plugin: exit 1, nothing on stdout, one line on stderr saying what and when.
// The hanging ones get a short timeout; the others a long one, since --timeout also bounds the
// worker's start, and an ASan worker on a loaded 2-core CI host once took over 1 s to start.
class Misbehaving : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

bool hangs(const std::string& backend) { return backend.rfind("hang_", 0) == 0; }

TEST_P(Misbehaving, IsOneLineAndExitOne) {
  const auto& [backend, expected] = GetParam();
  auto r = run_crucible("run-graph " + kGraph + " --backend " + backend + kPlugins +
                        (hangs(backend) ? " --timeout 3" : " --timeout 300"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("crucible run-graph: " + backend + " ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, Misbehaving,
    ::testing::Values(
        std::make_pair(std::string("hang_compile"),
                       "timed out after 3 s while compiling " + kGraph),
        std::make_pair(std::string("hang_run"), "timed out after 3 s while running " + kGraph),
        std::make_pair(std::string("segv"), "crashed with SIGSEGV while running " + kGraph),
        std::make_pair(std::string("abort"), "crashed with SIGABRT while running " + kGraph),
        std::make_pair(std::string("exit0"), "ended the process with exit status 0 while running " +
                                                 kGraph + ", before run-graph had its result")),
    [](const auto& info) { return info.param.first; });

TEST(RunGraph, BackendErrorsKeepTheirExitStatus) {
  // The faulty backend's planted faults, keyed on the graph's name: a compile error is exit 1 with
  // the backend's message; a run error is exit 1 too (the backend failed, the input was fine).
  auto compile = run_crucible("run-graph " + kGraph + " --backend faulty" + kPlugins +
                              " -c fault.sin_cos=compile_error");
  EXPECT_EQ(compile.status, 1);
  EXPECT_EQ(compile.err, "crucible run-graph: faulty failed to compile " + kGraph +
                             ": faulty: cannot lower op 'neg' for u8\n");
  auto run = run_crucible("run-graph " + kGraph + " --backend faulty" + kPlugins +
                          " -c fault.sin_cos=run_error");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "crucible run-graph: faulty failed to run " + kGraph +
                         ": faulty: kernel launch failed\n");
  // The same plugin through a configured fault rather than its own code: contained alike.
  auto segv = run_crucible("run-graph " + kGraph + " --backend faulty" + kPlugins +
                           " -c fault.sin_cos=segv");
  EXPECT_EQ(segv.status, 1);
  EXPECT_NE(segv.err.find("crashed with SIGSEGV while running"), std::string::npos) << segv.err;
  auto ok = run_crucible("run-graph " + kGraph + " --backend faulty" + kPlugins);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("sum=48.454 fnv=" + kSinCosFnv), std::string::npos) << ok.out;
}

TEST(RunGraph, BadTimeoutAndBadInputAreExitTwo) {
  for (const char* t : {"0", "-3", "nan"}) {
    auto r = run_crucible("run-graph " + kGraph + " --timeout " + t);
    EXPECT_EQ(r.status, 2) << t;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
  }
  auto missing = run_crucible("run-graph /nonexistent/x.graph --backend segv" + kPlugins);
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(count_lines(missing.err), 1) << missing.err;
}

}  // namespace
}  // namespace crucible
