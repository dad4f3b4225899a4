// `crucible minify` and `crucible repro` end to end, on real workers and the real codegen
// toolchain: the tutorial's two stories, a flaky backend, a backend that passes, and repros that
// were truncated, edited or written for another ABI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "cli_util.h"
#include "crucible/ir/text_format.h"
#include "crucible/reports/store.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_crucible;

class MinifyCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::fresh_test_dir("crucible_minify"); }
  void TearDown() override { fs::remove_all(dir_); }

  std::set<std::string> ops(const fs::path& repro) {
    const Graph g = load_graph_file(repro / "graph.graph");
    std::set<std::string> out;
    for (const Node& n : g.nodes()) out.insert(n.op);
    return out;
  }
  std::string line_of(const fs::path& manifest, const std::string& key) {
    std::ifstream in(manifest);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
    }
    return "";
  }

  // Every minify records a row: in this test's own database, not the working directory's.
  std::string minify_db() const { return " --db " + (dir_ / "m.db").string(); }
  fs::path dir_;
};

TEST_F(MinifyCli, TutorialNegTimes2MinifiesToNegAndReproduces) {
  const fs::path out = dir_ / "f32";
  auto r = run_crucible(
      "minify --suite tutorial --only neg_maximum_cat_f32 --backend codegen "
      "-c inject=neg:times2 -o " +
      out.string() + minify_db());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(ops(out), (std::set<std::string>{"neg"})) << r.out;
  EXPECT_EQ(line_of(out / "manifest.txt", "signature"), "fail_accuracy f32 band 0");
  EXPECT_EQ(line_of(out / "manifest.txt", "replays"), "5 5");
  EXPECT_NE(r.out.find("3 nodes -> 1 (1 compute)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cosim: first diverging node %a\n"), std::string::npos) << r.out;
  // Kernel bisection: neg's kernel, with its generated code, beside the repro.
  EXPECT_EQ(line_of(out / "manifest.txt", "culprit"), "kernel cpp_fused_neg_0 (node %a)");
  EXPECT_EQ(line_of(out / "manifest.txt", "code_hash").size(), 16u);
  EXPECT_EQ(line_of(out / "manifest.txt", "seed"), "0");
  EXPECT_NE(testing::read_all(out / "culprit_kernel.cpp").find("2 * t"), std::string::npos);
  const auto repros = reports::Store::open(dir_ / "m.db")->repros();
  ASSERT_EQ(repros.size(), 1u);
  EXPECT_EQ(repros[0].culprit_kernel, "cpp_fused_neg_0");
  EXPECT_EQ(repros[0].culprit_pass, "");
  // The backend's own version, from the worker that loaded it, in the manifest and the store.
  const std::string version = line_of(out / "manifest.txt", "backend_version");
  EXPECT_FALSE(version.empty());
  EXPECT_EQ(repros[0].backend_version, version);
  EXPECT_NE(r.err.find("oracle calls"), std::string::npos) << r.err;  // progress lines
  EXPECT_NE(r.err.find("ETA ~"), std::string::npos) << r.err;
  r = run_crucible("repro " + out.string());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced 5/5"), std::string::npos) << r.out;

  // Rerun against another version of the backend: said, and still rerun.
  std::string manifest = testing::read_all(out / "manifest.txt");
  const std::string written = testing::read_all(out / "manifest.txt");
  manifest.replace(manifest.find("backend_version " + version), 16 + version.size(),
                   "backend_version 0.0.9");
  std::ofstream(out / "manifest.txt", std::ios::trunc) << manifest;
  r = run_crucible("repro " + out.string() + " --times 1");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("note: written with codegen 0.0.9, rerun with codegen " + version),
            std::string::npos)
      << r.out;
  std::ofstream(out / "manifest.txt", std::ios::trunc) << written;

  // Without the injection the repro no longer fails: exit 1, said so.
  manifest = testing::read_all(out / "manifest.txt");
  manifest.replace(manifest.find("config inject=neg:times2\n"), 25, "");
  std::ofstream(out / "manifest.txt", std::ios::trunc) << manifest;
  r = run_crucible("repro " + out.string() + " --times 2");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("not reproduced: 0/2"), std::string::npos) << r.out;
}

// A pass far from fp64 (inject=sin:drift, inside allclose) is minified to its op when asked for,
// and named but left alone otherwise.
TEST_F(MinifyCli, SuspiciousPassMinifiesToItsOpWhenAskedFor) {
  const std::string what =
      "--suite tutorial --only sin_cos --backend codegen -c inject=sin:drift" + minify_db();
  auto run = run_crucible(
      "run --suite tutorial --only sin_cos --backends codegen -c inject=sin:drift --db " +
      (dir_ / "r.db").string() + " -o " + (dir_ / "run").string());
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("suspicious"), std::string::npos) << run.out;

  auto plain = run_crucible("minify " + what + " -o " + (dir_ / "plain").string());
  EXPECT_EQ(plain.status, 1) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("pass_suspicious f32 in 3 runs) (--signature suspicious minifies it)"),
            std::string::npos)
      << plain.out;

  const fs::path out = dir_ / "suspicious";
  auto r = run_crucible("minify " + what + " --signature suspicious -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(ops(out), (std::set<std::string>{"sin"})) << r.out;
  EXPECT_EQ(line_of(out / "manifest.txt", "signature"), "pass_suspicious f32");
  r = run_crucible("repro " + out.string() + " --times 2");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced 2/2"), std::string::npos) << r.out;
}

// Without -o, a second minify of the same graph writes beside the first repro, never over it:
// the store's rows point at both.
TEST_F(MinifyCli, DefaultReproFoldersDoNotReplaceEachOther) {
  const std::string cmd = "cd " + dir_.string() + " && " + CRUCIBLE_BIN_DIR +
                          "/crucible minify --suite tutorial --only neg_maximum_cat_f32 --backend "
                          "codegen -c inject=neg:times2 --determinism 1 --replays 1 "
                          "--no-kernel-bisect --no-cosim" +
                          minify_db();
  for (int i = 0; i < 2; ++i) {
    auto r = testing::run_command(cmd);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
  }
  EXPECT_TRUE(fs::exists(dir_ / "minify_out" / "neg_maximum_cat_f32" / "manifest.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "minify_out" / "neg_maximum_cat_f32.2" / "manifest.txt"));
  const auto repros = reports::Store::open(dir_ / "m.db")->repros();
  ASSERT_EQ(repros.size(), 2u);
  EXPECT_NE(repros[0].path, repros[1].path);
}

TEST_F(MinifyCli, TutorialU8NoCastKeepsTheCompileErrorAndItsTwoNodes) {
  const fs::path out = dir_ / "u8";
  auto r = run_crucible(
      "minify --suite tutorial --only neg_maximum_cat_u8 --backend codegen "
      "-c inject=neg:no_cast --signature compile --jobs 2 -o " +
      out.string() + minify_db());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  // The bug exists only when neg is fused into maximum: both stay, cat goes.
  EXPECT_EQ(ops(out), (std::set<std::string>{"neg", "maximum"})) << r.out;
  EXPECT_EQ(line_of(out / "manifest.txt", "signature"),
            "fail_to_compile: error: no matching function for call to 'cr_maximum(unsigned "
            "char&, int&)'");
  // Either node through eager, or fusion off, and the error is gone: the fused kernel is to blame.
  EXPECT_EQ(line_of(out / "manifest.txt", "culprit"),
            "kernel cpp_fused_maximum_neg_0 (nodes %a, %b); passes: fusion");
  r = run_crucible("repro " + out.string());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced 5/5"), std::string::npos) << r.out;
}

TEST_F(MinifyCli, FlakyPassingAndBadRequestsAreSaidAndExitNonZero) {
  const std::string plugins = std::string(" --plugin-path ") + CRUCIBLE_TEST_PLUGIN_DIR;
  fs::create_directories(dir_ / "count");
  // The plugin counts its runs across workers there: a folder its sandbox must let it write.
  auto r = run_crucible(
      "minify --suite tutorial --only sin_cos --backend faulty -c fault.sin_cos=flaky:" +
          (dir_ / "count").string() + plugins + " -o " + (dir_ / "flaky").string() + minify_db(),
      "CRUCIBLE_WORKER_WRITABLE=" + (dir_ / "count").string());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("flaky: fail_accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 3 runs"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "flaky" / "manifest.txt"));

  // Candidates without cos hang (the first prefix tried, {sin}, does): each is timed out
  // (--timeout 1), a verdict like any other, and the minimization ends at cos.
  r = run_crucible(
      "minify --suite tutorial --only sin_cos --backend faulty -c fault.sin_cos=hang_without:cos "
      "--timeout 1 --replays 1" +
      plugins + " -o " + (dir_ / "hang").string() + minify_db());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(ops(dir_ / "hang"), (std::set<std::string>{"cos"})) << r.out;

  // A backend without intermediates: no localization, the passes alone still get there.
  r = run_crucible(
      "minify --suite tutorial --only sin_cos --backend faulty -c fault.sin_cos=wrong" + plugins +
      " -o " + (dir_ / "wrong").string() + minify_db());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("cosim:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes -> 1 (1 compute)"), std::string::npos) << r.out;

  r = run_crucible("minify --suite tutorial --only sin_cos --backend codegen -o " +
                   (dir_ / "pass").string() + minify_db());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("does not fail"), std::string::npos) << r.out;

  r = run_crucible("minify " + (dir_ / "missing.graph").string() + " --backend codegen" +
                   minify_db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("missing.graph"), std::string::npos) << r.err;
  r = run_crucible("minify --suite tutorial --only sin_cos --backend no_such_backend" +
                   minify_db());
  EXPECT_EQ(r.status, 2);
  r = run_crucible("minify --suite tutorial --only sin_cos --backend codegen --signature odd" +
                   minify_db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--signature must be"), std::string::npos) << r.err;
}

// A bug planted in a decomposition (the sum inside softmax's decomposed form): the culprit is the
// softmax's kernel and the pass is that decomposition.
TEST_F(MinifyCli, DecompositionBugIsBisectedToItsPass) {
  std::ofstream(dir_ / "sm.graph") << "graph sm(%x: f32[4,16]) {\n  %h = mul(%x, %x)\n"
                                      "  %s = softmax(%h, dim=-1)\n  %y = neg(%s)\n"
                                      "  return %y\n}\n";
  const fs::path out = dir_ / "sm";
  auto r = run_crucible("minify " + (dir_ / "sm.graph").string() +
                        " --backend codegen -c inject=sum:bad_init@s.sum --replays 1 -o " +
                        out.string() + minify_db());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(ops(out), (std::set<std::string>{"softmax"}));
  EXPECT_EQ(line_of(out / "manifest.txt", "culprit"),
            "kernel cpp_fused_amax_div_exp_sub_sum_0 (node %s); passes: decompose(softmax)");
}

// Any backend's declared passes are bisected as codegen's are (the faulty plugin's `shortcut`,
// declared with FAULTY_DECLARES=1): turned off, the failure goes, and the culprit names it. It
// declares no per-node fallback and no code file, so no node or kernel is blamed. Undeclared,
// nothing is bisected and the manifest says nothing of a culprit.
TEST_F(MinifyCli, ADeclaredPassOfAnyBackendIsBisected) {
  const std::string args = std::string("minify --suite tutorial --only sin_cos --backend faulty ") +
                           "-c fault.sin_cos=shortcut --replays 1 --plugin-path " +
                           CRUCIBLE_TEST_PLUGIN_DIR + minify_db() + " -o ";
  auto r = run_crucible(args + (dir_ / "declared").string(), "FAULTY_DECLARES=1");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(line_of(dir_ / "declared" / "manifest.txt", "culprit"), "passes: shortcut") << r.out;
  EXPECT_NE(r.out.find("culprit: passes: shortcut"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "declared" / "culprit_kernel.cpp"));
  r = run_crucible(args + (dir_ / "plain").string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("culprit"), std::string::npos) << r.out;
  EXPECT_EQ(testing::read_all(dir_ / "plain" / "manifest.txt").find("culprit"), std::string::npos);
}

TEST_F(MinifyCli, RunBisectMinifiesNewFailuresOnceAndStoresThem) {
  const std::string args =
      "run --suite tutorial --only neg_maximum_cat_f32,sin_cos --backends "
      "codegen -c inject=neg:times2 --mode accuracy --bisect --db " +
      (dir_ / "r.db").string() + " -o " + (dir_ / "out" / "run_{run}").string();
  auto r = run_crucible(args);
  EXPECT_EQ(r.status, 1) << r.out << r.err;  // the planted failure fails the run
  EXPECT_NE(r.err.find("bisect: tutorial/neg_maximum_cat_f32 on codegen: fail_accuracy f32 band 0: "
                       "3 nodes -> 1"),
            std::string::npos)
      << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  auto repros = store->repros();
  ASSERT_EQ(repros.size(), 1u);  // sin_cos passed: nothing to minify
  EXPECT_EQ(repros[0].outcome, "minimized");
  EXPECT_EQ(repros[0].model, "neg_maximum_cat_f32");
  EXPECT_EQ(repros[0].config, "inject=neg:times2");
  EXPECT_EQ(repros[0].run_id, store->runs().at(0).id);
  EXPECT_EQ(repros[0].nodes_after, 1);
  EXPECT_EQ(repros[0].replays_ok, 5);
  EXPECT_GT(repros[0].oracle_calls, 0);
  EXPECT_EQ(ops(repros[0].path), (std::set<std::string>{"neg"}));
  // The same failure in the next run is not new: not minified again.
  store.reset();
  r = run_crucible(args);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already in an earlier run"), std::string::npos) << r.err;
  EXPECT_EQ(reports::Store::open(dir_ / "r.db")->repros().size(), 1u);
  // A standalone minify records its row too.
  r = run_crucible(
      "minify --suite tutorial --only neg_maximum_cat_u8 --backend codegen "
      "-c inject=neg:no_cast --replays 1 --db " +
      (dir_ / "r.db").string() + " -o " + (dir_ / "u8").string());
  EXPECT_EQ(r.status, 0) << r.err;
  repros = reports::Store::open(dir_ / "r.db")->repros();
  ASSERT_EQ(repros.size(), 2u);
  EXPECT_EQ(repros[0].model, "neg_maximum_cat_u8");
  EXPECT_FALSE(repros[0].run_id.has_value());
  r = run_crucible("run --suite tutorial --mode performance --bisect --db " +
                   (dir_ / "r.db").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--bisect needs --mode accuracy or both"), std::string::npos) << r.err;
}

// Killed while a candidate's worker runs (held inside run() by the faulty plugin's gate): the
// command exits 130 and takes the worker with it.
TEST_F(MinifyCli, KilledMinifyLeavesNoWorkerBehind) {
  const fs::path gate = dir_ / "gate";
  fs::create_directories(gate);
  const std::string script =
      "CRUCIBLE_WORKER_WRITABLE=" + gate.string() + " " + std::string(CRUCIBLE_BIN_DIR) +
      "/crucible minify --suite tutorial --only sin_cos " + "--backend faulty --plugin-path " +
      CRUCIBLE_TEST_PLUGIN_DIR + " -c fault.sin_cos=gate:" + gate.string() + " -o " +
      (dir_ / "out").string() + minify_db() + " >/dev/null 2>&1 & pid=$!; " +
      "for i in $(seq 1 1200); do [ -f " + (gate / "sin_cos.started").string() +
      " ] && break; sleep 0.05; done; kill -TERM $pid; wait $pid; echo rc=$?; " + "w=$(cat " +
      (gate / "sin_cos.started").string() + "); " +
      "for i in $(seq 1 100); do kill -0 $w 2>/dev/null || break; sleep 0.05; done; " +
      "kill -0 $w 2>/dev/null && echo worker=alive || echo worker=gone";
  const fs::path out = dir_ / "script.out";
  ASSERT_EQ(std::system(("bash -c '" + script + "' > " + out.string()).c_str()), 0);
  const std::string said = testing::read_all(out);
  EXPECT_NE(said.find("rc=130"), std::string::npos) << said;
  EXPECT_NE(said.find("worker=gone"), std::string::npos) << said;
}

TEST_F(MinifyCli, TamperedReprosAreRefusedInOneLine) {
  const fs::path good = dir_ / "good";
  auto r = run_crucible(
      "minify --suite tutorial --only neg_maximum_cat_f32 --backend codegen "
      "-c inject=neg:times2 --replays 1 -o " +
      good.string() + minify_db());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto tampered = [&](const std::string& name, auto&& edit) {
    const fs::path d = dir_ / name;
    fs::copy(good, d);
    edit(d);
    return run_crucible("repro " + d.string());
  };
  // A truncated input.
  r = tampered("truncated", [](const fs::path& d) { fs::resize_file(d / "input.x1.bin", 16); });
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("truncated or replaced"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // An edited graph, same size.
  r = tampered("edited", [](const fs::path& d) {
    std::string g = testing::read_all(d / "graph.graph");
    g.replace(g.find("neg("), 4, "exp(");
    std::ofstream(d / "graph.graph", std::ios::trunc) << g;
  });
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("was edited"), std::string::npos) << r.err;
  // Another ABI, and another format.
  r = tampered("abi", [](const fs::path& d) {
    std::string m = testing::read_all(d / "manifest.txt");
    m.replace(m.find("abi "), 5, "abi 9");
    std::ofstream(d / "manifest.txt", std::ios::trunc) << m;
  });
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("plugin ABI 9"), std::string::npos) << r.err;
  r = tampered("format", [](const fs::path& d) {
    std::string m = testing::read_all(d / "manifest.txt");
    std::ofstream(d / "manifest.txt", std::ios::trunc) << "crucible-repro 0" << m.substr(16);
  });
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a repro manifest of this version"), std::string::npos) << r.err;
  // -o pointing at a directory that holds something else: refused before any work, untouched.
  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "keep me\n";
  r = run_crucible("minify --suite tutorial --only neg_maximum_cat_f32 --backend codegen -o " +
                   (dir_ / "mine").string() + minify_db());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is not a repro directory"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_all(dir_ / "mine" / "notes.txt"), "keep me\n");
  r = run_crucible("repro " + (dir_ / "nowhere").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a repro directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crucible
