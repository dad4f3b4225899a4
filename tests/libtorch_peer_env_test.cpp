// The libtorch peer at its best, and recorded (issue 33, parts 1-3): a per-backend environment
// applied only while that backend loads, the BLAS core chosen by measurement with every
// candidate's time or reason recorded, bad candidates discarded, the version string saying what
// the peer ran, and PyTorch's oneDNN linear as a peer mode. Real binary, real workers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "backend_env.h"
#include "blas_cores.h"
#include "cli_util.h"
#include "crucible/core/error.h"

namespace crucible {
namespace {

using testing::query_text;
using testing::run_crucible;

// A run of the tutorial's linear_layernorm_relu (a GEMM, quick) on `backends` in its own store.
struct PeerRun {
  std::filesystem::path dir, db;
  testing::CliResult r;
  PeerRun(const std::string& name, const std::string& backends, const std::string& args,
          const std::string& env = "") {
    dir = testing::fresh_test_dir("crucible_peer_env_" + name);
    db = dir / "runs.db";
    r = run_crucible("run --suite tutorial --only linear_layernorm_relu --backends " + backends +
                         " --db " + db.string() + " -o " + (dir / "out").string() + " " + args,
                     env);
  }
  ~PeerRun() { std::filesystem::remove_all(dir); }
  std::string version(const std::string& backend) const {
    return query_text(db, "SELECT backend_version FROM results WHERE backend = '" + backend + "'");
  }
  std::string launcher() const { return query_text(db, "SELECT launcher_json FROM runs"); }
};

std::string core_of(const std::string& version) {
  std::smatch m;
  return std::regex_search(version, m, std::regex("BLAS core ([A-Za-z0-9_]+)")) ? m[1].str() : "";
}

TEST(BackendEnv, ParsesSetsAndUnsetsAndRejectsBadSpecs) {
  const BackendEnv env =
      parse_backend_env({"libtorch:A=1", "libtorch:-B", "libtorch_jit:C=x=y", "libtorch:A=2"});
  EXPECT_EQ(env.at("libtorch").at("A"), "2");
  EXPECT_FALSE(env.at("libtorch").at("B").has_value());
  EXPECT_EQ(env.at("libtorch_jit").at("C"), "x=y");
  EXPECT_EQ(parse_backend_env(backend_env_specs(env)), env);
  for (const char* bad :
       {"A=1", ":A=1", "libtorch:A", "libtorch:-", "libtorch:1A=2", "libtorch:=1"})
    EXPECT_THROW(parse_backend_env({bad}), Error) << bad;
}

TEST(BackendEnv, ScopedEnvSetsUnsetsAndRestores) {
  ::setenv("CRUCIBLE_T_KEEP", "before", 1);
  ::unsetenv("CRUCIBLE_T_NEW");
  {
    ScopedEnv scoped({{"CRUCIBLE_T_KEEP", std::nullopt}, {"CRUCIBLE_T_NEW", "set"}});
    EXPECT_EQ(std::getenv("CRUCIBLE_T_KEEP"), nullptr);
    EXPECT_STREQ(std::getenv("CRUCIBLE_T_NEW"), "set");
  }
  EXPECT_STREQ(std::getenv("CRUCIBLE_T_KEEP"), "before");
  EXPECT_EQ(std::getenv("CRUCIBLE_T_NEW"), nullptr);
}

// The peer's declaration (blas_cores.h): the cores whose instructions the CPU has, each checked
// by the core its version shows; detect only when the environment pins a core.
TEST(BlasCore, CandidatesFollowTheCpuFlags) {
  auto names = [](const plugin::LoadEnvChoice& c) {
    std::string out;
    for (const auto& cand : c.candidates) out += cand.name + " ";
    return out;
  };
  using libtorch::blas_core_choice;
  EXPECT_EQ(names(blas_core_choice({"sse4_2", "avx2", "fma"}, true)), "env detect Haswell Zen ");
  EXPECT_EQ(
      names(blas_core_choice(
          {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"}, true)),
      "env detect Haswell Zen SkylakeX Cooperlake ");
  EXPECT_EQ(names(blas_core_choice({"avx2", "fma"}, false)), "env Haswell Zen ");
  const auto sse = blas_core_choice({"sse4_2"}, true);
  EXPECT_EQ(names(sse), "env detect ");
  EXPECT_FALSE(sse.candidates[1].env.at("OPENBLAS_CORETYPE").has_value());
  const auto avx2 = blas_core_choice({"avx2", "fma"}, false);
  EXPECT_EQ(avx2.candidates[1].expect, "Haswell");
  EXPECT_EQ(avx2.candidates[1].env.at("OPENBLAS_CORETYPE"), "Haswell");
  EXPECT_TRUE(avx2.candidates[0].expect.empty());
  EXPECT_EQ(avx2.option, "blas_core");
  EXPECT_EQ(avx2.probe_config.at("linear"), "aten");
}

// A bad --backend-env is one line, exit 2, and no run in the store.
TEST(BackendEnv, BadSpecsAndUnknownBackendsAreRefused) {
  for (const char* spec : {"libtorch", "libtorch:NO_EQUALS", "codegen:A=1"}) {
    PeerRun run("bad", "libtorch", std::string("--backend-env ") + spec);
    EXPECT_EQ(run.r.status, 2) << spec << "\n" << run.r.err;
    EXPECT_EQ(testing::count_lines(run.r.err), 1) << run.r.err;
    EXPECT_NE(run.r.err.find("--backend-env"), std::string::npos) << run.r.err;
    EXPECT_FALSE(std::filesystem::exists(run.db) &&
                 query_text(run.db, "SELECT count(*) FROM runs") != "0\n");
  }
}

// The variable reaches its backend's worker while the plugin loads (OpenBLAS runs the core it
// names) and no other backend's; -KEY unsets it (OpenBLAS detects the core itself). Both are
// recorded with the run and shown in its header. Sandybridge is a core OpenBLAS runs when told
// to on any AVX2 machine and never detects on one.
TEST(BackendEnv, AppliesToItsBackendOnlyAndUnsets) {
  const std::string pinned = "OPENBLAS_CORETYPE=Sandybridge";
  PeerRun set("set", "libtorch,libtorch_jit", "--backend-env libtorch:OPENBLAS_CORETYPE=Zen",
              pinned);
  ASSERT_EQ(set.r.status, 0) << set.r.out << set.r.err;
  EXPECT_EQ(core_of(set.version("libtorch")), "Zen") << set.version("libtorch");
  EXPECT_EQ(core_of(set.version("libtorch_jit")), "Sandybridge") << set.version("libtorch_jit");
  EXPECT_TRUE(std::regex_search(
      set.launcher(), std::regex(R"("backend_env\.libtorch":\s*"OPENBLAS_CORETYPE=Zen")")))
      << set.launcher();
  EXPECT_NE(set.r.err.find("backend_env.libtorch: OPENBLAS_CORETYPE=Zen"), std::string::npos)
      << set.r.err;

  PeerRun unset("unset", "libtorch,libtorch_jit", "--backend-env libtorch_jit:-OPENBLAS_CORETYPE",
                pinned);
  ASSERT_EQ(unset.r.status, 0) << unset.r.out << unset.r.err;
  EXPECT_EQ(core_of(unset.version("libtorch")), "Sandybridge") << unset.version("libtorch");
  const std::string detected = core_of(unset.version("libtorch_jit"));
  EXPECT_FALSE(detected.empty() || detected == "Sandybridge") << unset.version("libtorch_jit");
  EXPECT_TRUE(std::regex_search(
      unset.launcher(), std::regex(R"("backend_env\.libtorch_jit":\s*"-OPENBLAS_CORETYPE")")))
      << unset.launcher();
}

// blas_core=auto probes every candidate, records each one's time (or why it was discarded) and
// the choice, and runs the peer on it; a candidate that computes wrong results or crashes is
// discarded with its reason, never chosen.
TEST(BlasCore, AutoRecordsTheCandidatesAndDiscardsBadOnes) {
  PeerRun run("auto", "libtorch,libtorch_jit",
              "-c libtorch:blas_core=auto -c libtorch_jit:blas_core=auto",
              "CRUCIBLE_TEST_LOAD_ENV_FAULT=env:wrong,Haswell:crash");
  ASSERT_EQ(run.r.status, 0) << run.r.out << run.r.err;
  const std::string launcher = run.launcher();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      launcher, m,
      std::regex(
          R"re("blas_core\.libtorch":\s*"([A-Za-z0-9_]+) \(blas_core=auto; probe ms: ([^"]*)\)")re")))
      << launcher;
  const std::string chosen = m[1].str(), probes = m[2].str();
  EXPECT_NE(probes.find("env discarded (fail_accuracy"), std::string::npos) << probes;
  EXPECT_NE(probes.find("Haswell discarded (crash"), std::string::npos) << probes;
  EXPECT_NE(chosen, "env");
  EXPECT_NE(chosen, "Haswell");
  EXPECT_TRUE(std::regex_search(probes, std::regex(chosen + R"(\[\w+\] [0-9.]+)"))) << probes;
  // One probe serves both peers; each result's version says which core ran and why.
  EXPECT_NE(launcher.find("\"blas_core.libtorch_jit\": \"" + chosen +
                          " (blas_core=auto; probe ms: " + probes + ")\""),
            std::string::npos)
      << launcher;
  for (const char* b : {"libtorch", "libtorch_jit"}) {
    const std::string version = run.version(b);
    EXPECT_NE(version.find("blas_core " + chosen + " (blas_core=auto"), std::string::npos)
        << version;
    if (chosen != "detect") {
      EXPECT_EQ(core_of(version), chosen) << version;
    }
  }
  EXPECT_NE(run.r.err.find("blas_core.libtorch: " + chosen), std::string::npos) << run.r.err;
}

// The test suite keeps the environment as it is (CRUCIBLE_BLAS_CORE=env from ctest), and a name
// that is no candidate of this machine (its declaration lists those its CPU runs) is bad input:
// one line naming the candidates, exit 2, no run recorded.
TEST(BlasCore, EnvKeepsTheEnvironmentAndAnUnknownNameIsRefused) {
  PeerRun env("env", "libtorch", "", "OPENBLAS_CORETYPE=Zen");
  ASSERT_EQ(env.r.status, 0) << env.r.err;
  EXPECT_EQ(core_of(env.version("libtorch")), "Zen") << env.version("libtorch");
  EXPECT_NE(env.r.err.find("blas_core.libtorch: env (blas_core=env)"), std::string::npos)
      << env.r.err;
  PeerRun bogus("bogus", "libtorch", "-c libtorch:blas_core=NoSuchCore");
  EXPECT_EQ(bogus.r.status, 2) << bogus.r.err;
  EXPECT_EQ(testing::count_lines(bogus.r.err), 1) << bogus.r.err;
  EXPECT_NE(bogus.r.err.find("-c libtorch:blas_core=NoSuchCore: not a choice on this machine "
                             "(want auto, env"),
            std::string::npos)
      << bogus.r.err;
  EXPECT_FALSE(std::filesystem::exists(bogus.db) &&
               query_text(bogus.db, "SELECT count(*) FROM runs") != "0\n");
}

// What the peer ran is in each result's version string.
TEST(PeerFacts, VersionSaysDispatchOneDnnBlasThreadsAndAllocator) {
  PeerRun run("facts", "libtorch", "--threads 2");
  ASSERT_EQ(run.r.status, 0) << run.r.err;
  const std::string v = run.version("libtorch");
  EXPECT_TRUE(std::regex_search(
      v, std::regex(R"(ATen (DEFAULT|AVX2|AVX512); oneDNN \d+\.\d+\.\d+ \(conv2d (yes|no), )"
                    R"(linear (yes|no), matmul (yes|no)\); BLAS OpenBLAS .*; BLAS core \w+; )"
                    R"(threads intra 2, inter \d+; allocator (glibc malloc|jemalloc|tcmalloc))")))
      << v;
}

// PyTorch's oneDNN linear passes the accuracy rule on a transformer, in both modes, and the jit
// module really calls it.
TEST(PeerFacts, MkldnnLinearPassesAccuracyOnATransformer) {
  const auto dir = testing::fresh_test_dir("crucible_peer_mkldnn");
  const auto r = run_crucible(
      "run --suite transformer --variant small --only bert_base --backends libtorch,libtorch_jit "
      "-c libtorch:linear=mkldnn -c libtorch_jit:linear=mkldnn -c libtorch_jit:debug_dir=" +
      (dir / "debug").string() + " --db " + (dir / "runs.db").string() + " -o " +
      (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(query_text(dir / "runs.db", "SELECT count(*) FROM results WHERE status = 'pass'"),
            "2\n");
  EXPECT_NE(testing::read_all(dir / "debug" / "torchscript.py").find("torch.mkldnn_linear("),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crucible
