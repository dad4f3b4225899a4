// The libtorch peer's -c linear=auto (issue 33): each linear shape's path chosen by measurement,
// recorded in the version string and honoured per node by both modes, a broken oneDNN path
// discarded; and run-graph, minify and repro running a peer under the run's BLAS core choice.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cli_util.h"

namespace crucible {
namespace {

using testing::query_text;
using testing::read_all;
using testing::run_crucible;

// Three linear shapes: 256x512->1024 twice (other weights), 256x1024->512 without bias, and a
// tiny 256x512->16 (2M multiply-adds) that is never timed.
constexpr const char* kShapes = R"(graph linear_shapes(%x: f32[256,512]) {
  param %w1: f32[1024,512] = uniform(seed=1, low=-0.044, high=0.044)
  param %b1: f32[1024] = uniform(seed=2, low=-0.044, high=0.044)
  param %w2: f32[512,1024] = uniform(seed=3, low=-0.031, high=0.031)
  param %w3: f32[1024,512] = uniform(seed=4, low=-0.044, high=0.044)
  param %b3: f32[1024] = uniform(seed=5, low=-0.044, high=0.044)
  param %w4: f32[16,512] = uniform(seed=6, low=-0.044, high=0.044)
  %h = linear(%x, %w1, %b1)
  %y = linear(%h, %w2)
  %h2 = linear(%y, %w3, %b3)
  %t = linear(%y, %w4)
  return %h2, %t
}
)";

struct TestDir {
  std::filesystem::path dir;
  explicit TestDir(const std::string& name)
      : dir(testing::fresh_test_dir("crucible_linear_" + name)) {}
  ~TestDir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

// linear auto's line in a version string: "linear auto: mkldnn for N of M shapes (...)".
struct AutoLine {
  int onednn = -1, shapes = -1;
  std::string detail;
};
AutoLine auto_line(const std::string& version) {
  std::smatch m;
  AutoLine a;
  if (std::regex_search(version, m,
                        std::regex(R"(linear auto: mkldnn for (\d+) of (\d+) shapes \((.*)\))"))) {
    a.onednn = std::stoi(m[1].str());
    a.shapes = std::stoi(m[2].str());
    a.detail = m[3].str();
  }
  return a;
}

// The nodes of kShapes each timed shape's choice sends to oneDNN, from the figures the line
// gives (the faster path wins); -1 when two printed figures tie and the line cannot tell.
int onednn_nodes_claimed(const AutoLine& a, int* shapes_chosen) {
  const std::map<std::string, int> nodes = {{"256x512->1024", 2}, {"256x1024->512 nobias", 1}};
  int total = 0;
  *shapes_chosen = 0;
  for (const auto& [shape, count] : nodes) {
    std::smatch m;
    const std::regex fig(shape + R"(: aten ([0-9.]+), mkldnn ([0-9.]+) ms)");
    if (!std::regex_search(a.detail, m, fig)) {
      ADD_FAILURE() << shape << " not timed: " << a.detail;
      return -1;
    }
    const double aten = std::stod(m[1].str()), onednn = std::stod(m[2].str());
    if (aten == onednn) return -1;
    if (onednn < aten) {
      total += count;
      ++*shapes_chosen;
    }
  }
  return total;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// auto times each shape large enough to matter, says so in the version string, and both modes
// send exactly the nodes of the shapes it chose to oneDNN: eager's profile names them
// aten::mkldnn_linear, jit's module calls torch.mkldnn_linear for them.
TEST(LibtorchPeerLinear, AutoChoosesPerShapeAndBothModesHonourIt) {
  TestDir t("auto");
  const std::string graph = t.write("shapes.graph", kShapes);
  const auto eager = run_crucible("run-graph " + graph + " --backend libtorch --profile");
  ASSERT_EQ(eager.status, 0) << eager.err;
  const AutoLine a = auto_line(eager.out);
  ASSERT_EQ(a.shapes, 3) << eager.out;
  EXPECT_NE(a.detail.find("256x512->16 nobias: tiny, aten"), std::string::npos) << a.detail;
  int chosen = 0;
  const int nodes = onednn_nodes_claimed(a, &chosen);
  if (nodes >= 0) {
    EXPECT_EQ(a.onednn, chosen) << a.detail;
    std::smatch m;
    const bool profiled =
        std::regex_search(eager.out, m, std::regex(R"(aten::mkldnn_linear\s+(\d+))"));
    EXPECT_EQ(profiled ? std::stoi(m[1].str()) : 0, nodes) << eager.out;
    const bool on_aten = std::regex_search(eager.out, m, std::regex(R"(aten::linear\s+(\d+))"));
    EXPECT_EQ(on_aten ? std::stoi(m[1].str()) : 0, 4 - nodes) << eager.out;
  }

  const auto jit = run_crucible(
      "run-graph " + graph + " --backend libtorch_jit -c debug_dir=" + (t.dir / "debug").string());
  ASSERT_EQ(jit.status, 0) << jit.err;
  const AutoLine j = auto_line(jit.out);
  ASSERT_EQ(j.shapes, 3) << jit.out;
  const int jit_nodes = onednn_nodes_claimed(j, &chosen);
  if (jit_nodes >= 0) {
    EXPECT_EQ(j.onednn, chosen) << j.detail;
    EXPECT_EQ(count_of(read_all(t.dir / "debug" / "torchscript.py"), "torch.mkldnn_linear("),
              jit_nodes);
  }
}

// A oneDNN path that computes wrong values, or throws, is discarded with its reason and never
// chosen: the run passes on ATen's. With linear=mkldnn (no probe) the same planted fault is an
// accuracy failure, so the plant is real and the probe is what kept it out.
TEST(LibtorchPeerLinear, AutoDiscardsAWrongOrThrowingOneDnnPath) {
  TestDir t("fault");
  const std::string graph = t.write("shapes.graph", kShapes);
  for (const std::string fault : {"wrong", "throw"}) {
    const std::string db = (t.dir / (fault + ".db")).string();
    const auto r = run_crucible("run --graph " + graph + " --backends libtorch,libtorch_jit --db " +
                                    db + " -o " + (t.dir / fault).string(),
                                "CRUCIBLE_TEST_LINEAR_FAULT=" + fault);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(query_text(db, "SELECT count(*) FROM results WHERE status = 'pass'"), "2\n");
    const std::string why = fault == "wrong" ? "mkldnn discarded, differs from aten by "
                                             : "mkldnn discarded, threw: planted oneDNN failure";
    for (const char* backend : {"libtorch", "libtorch_jit"}) {
      const AutoLine a = auto_line(query_text(
          db,
          std::string("SELECT backend_version FROM results WHERE backend = '") + backend + "'"));
      EXPECT_EQ(a.onednn, 0) << a.detail;
      EXPECT_NE(a.detail.find("256x512->1024: " + why), std::string::npos) << a.detail;
      EXPECT_NE(a.detail.find("256x1024->512 nobias: " + why), std::string::npos) << a.detail;
    }
  }
  const std::string db = (t.dir / "forced.db").string();
  const auto forced = run_crucible("run --graph " + graph + " --backends libtorch --db " + db +
                                       " -o " + (t.dir / "forced").string() + " -c linear=mkldnn",
                                   "CRUCIBLE_TEST_LINEAR_FAULT=wrong");
  EXPECT_EQ(forced.status, 1) << forced.out;
  EXPECT_EQ(query_text(db, "SELECT status FROM results"), "fail_accuracy\n");
}

// Explicit choices time nothing: no auto line, and a oneDNN path that would throw is never
// called under aten; under mkldnn every oneDNN-able linear takes it, the tiny one included.
TEST(LibtorchPeerLinear, ExplicitChoicesSkipTheTiming) {
  TestDir t("explicit");
  const std::string graph = t.write("shapes.graph", kShapes);
  for (const char* aten : {"aten", "default"}) {
    const auto r =
        run_crucible("run-graph " + graph + " --backend libtorch --profile -c linear=" + aten,
                     "CRUCIBLE_TEST_LINEAR_FAULT=throw");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find("linear auto"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("mkldnn_linear"), std::string::npos) << r.out;
  }
  const auto jit = run_crucible(
      "run-graph " + graph +
          " --backend libtorch_jit -c linear=mkldnn -c debug_dir=" + (t.dir / "debug").string(),
      "CRUCIBLE_TEST_LINEAR_FAULT=throw");
  EXPECT_EQ(jit.status, 0) << jit.err;
  EXPECT_EQ(jit.out.find("linear auto"), std::string::npos) << jit.out;
  EXPECT_EQ(count_of(read_all(t.dir / "debug" / "torchscript.py"), "torch.mkldnn_linear("), 4);
  const auto eager = run_crucible("run-graph " + graph + " --backend libtorch -c linear=mkldnn",
                                  "CRUCIBLE_TEST_LINEAR_FAULT=throw");
  EXPECT_EQ(eager.status, 1);
  EXPECT_NE(eager.err.find("planted oneDNN failure"), std::string::npos) << eager.err;
}

// A value the plugin would refuse is bad input before any worker: one line, exit 2.
TEST(LibtorchPeerLinear, AnInvalidValueIsOneLineExit2) {
  TestDir t("bad");
  const std::string graph = t.write("shapes.graph", kShapes);
  const std::string db = (t.dir / "runs.db").string();
  for (const std::string& cmd :
       {"run --graph " + graph + " --backends libtorch,libtorch_jit -c libtorch_jit:linear=fast " +
            "--db " + db + " -o " + (t.dir / "out").string(),
        "run-graph " + graph + " --backend libtorch -c linear=fast",
        "minify " + graph + " --backend libtorch -c linear=fast --db " + db + " -o " +
            (t.dir / "repro").string()}) {
    const auto r = run_crucible(cmd);
    EXPECT_EQ(r.status, 2) << cmd << "\n" << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("-c linear=fast"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db) && query_text(db, "SELECT count(*) FROM runs") != "0\n");
}

// run-graph applies a peer's BLAS core as run does: -c blas_core=NAME (which the plugin checks
// against the core OpenBLAS runs, so an unapplied choice fails) and --backend-env, over an
// environment that pins another core.
TEST(LibtorchPeerBlasCore, RunGraphAppliesTheCore) {
  TestDir t("run_graph");
  const std::string graph = t.write("shapes.graph", kShapes);
  const std::string pinned = "OPENBLAS_CORETYPE=Sandybridge";
  const auto named = run_crucible(
      "run-graph " + graph + " --backend libtorch -c linear=aten -c blas_core=Zen", pinned);
  EXPECT_EQ(named.status, 0) << named.err;
  EXPECT_NE(named.out.find("BLAS core Zen;"), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("blas_core Zen (blas_core=Zen)"), std::string::npos) << named.out;
  const auto env = run_crucible("run-graph " + graph +
                                    " --backend libtorch_jit -c linear=aten --backend-env "
                                    "libtorch_jit:OPENBLAS_CORETYPE=Zen",
                                pinned);
  EXPECT_EQ(env.status, 0) << env.err;
  EXPECT_NE(env.out.find("BLAS core Zen;"), std::string::npos) << env.out;
  const auto kept =
      run_crucible("run-graph " + graph + " --backend libtorch -c linear=aten", pinned);
  EXPECT_EQ(kept.status, 0) << kept.err;
  EXPECT_NE(kept.out.find("BLAS core Sandybridge;"), std::string::npos) << kept.out;
  const auto other = run_crucible(
      "run-graph " + graph + " --backend libtorch --backend-env codegen:OPENBLAS_CORETYPE=Zen");
  EXPECT_EQ(other.status, 2) << other.err;
  EXPECT_EQ(testing::count_lines(other.err), 1) << other.err;
}

// minify runs every candidate under the core it chose once, records it in the repro, and
// `crucible repro` reruns under it: the rerun's version (core and why) is the written one even
// where the environment pins another core. The failure is the planted wrong oneDNN path.
TEST(LibtorchPeerBlasCore, MinifyRecordsTheCoreAndReproReappliesIt) {
  TestDir t("minify");
  const std::string graph = t.write("lin.graph", R"(graph lin_relu(%x: f32[64,64]) {
  param %w: f32[64,64] = uniform(seed=1, low=-0.125, high=0.125)
  param %b: f32[64] = uniform(seed=2, low=-0.125, high=0.125)
  %h = linear(%x, %w, %b)
  %y = relu(%h)
  %z = mul(%y, %y)
  return %z
}
)");
  const std::string env = "OPENBLAS_CORETYPE=Sandybridge CRUCIBLE_TEST_LINEAR_FAULT=wrong";
  const std::string repro = (t.dir / "repro").string();
  const auto m = run_crucible("minify " + graph +
                                  " --backend libtorch -c linear=mkldnn -c blas_core=Zen "
                                  "--determinism 1 --replays 1 --no-cosim --db " +
                                  (t.dir / "runs.db").string() + " -o " + repro,
                              env);
  ASSERT_EQ(m.status, 0) << m.out << m.err;
  EXPECT_NE(m.err.find("minify: blas_core.libtorch: Zen (blas_core=Zen)"), std::string::npos)
      << m.err;
  const std::string manifest = read_all(t.dir / "repro" / "manifest.txt");
  EXPECT_NE(manifest.find("\nbackend_env OPENBLAS_CORETYPE=Zen\n"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\nbackend_env -OPENBLAS_L2_SIZE\n"), std::string::npos) << manifest;
  EXPECT_TRUE(std::regex_search(manifest, std::regex("backend_version .*BLAS core Zen;")))
      << manifest;
  const auto r = run_crucible("repro " + repro + " --times 1", env);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced 1/1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("note: written with"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace crucible
