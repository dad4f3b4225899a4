// crucible bisect end to end: a plugin repository of 16 commits whose output goes wrong at commit
// 11 and whose build is broken from commit 6 to 9, bisected with a real git, a real compiler
// and the real plugin loader; and the bad inputs it refuses in one line.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cli_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_crucible;

// A backend that runs the interpreter, its f32 outputs scaled by SCALE from config.h, each call
// then waiting until it has lasted SLOW times its work.
constexpr const char* kPlugin = R"(#include "config.h"
#include <chrono>
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"
namespace {
using namespace crucible;
class Exe final : public plugin::Executable {
 public:
  explicit Exe(const Graph& g) : interpreter_(g) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    for (const Tensor& t : interpreter_.run(inputs)) out.push_back(t.clone());
    for (Tensor& t : out) {
      if (t.dtype() != DType::kF32) continue;
      auto* p = static_cast<float*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) p[i] *= SCALE;
    }
    const std::chrono::duration<double> work = std::chrono::steady_clock::now() - t0;
    while (std::chrono::steady_clock::now() - t0 < work * SLOW) {
    }
    return out;
  }
  Interpreter interpreter_;
};
class Bis final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"bis", "test", plugin::kAbiVersion}; }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options&) override {
    return std::make_unique<Exe>(g);
  }
};
std::unique_ptr<plugin::Backend> create() { return std::make_unique<Bis>(); }
}  // namespace
CRUCIBLE_EXPORT_BACKEND(create)
)";

class Bisect : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_dir("crucible_bisect");
    repo_ = dir_ / "plugin";
    fs::create_directories(repo_);
    const fs::path lib = fs::path(CRUCIBLE_BIN_DIR).parent_path() / "lib";
    std::ofstream(repo_ / "plugin.cpp") << kPlugin;
    std::ofstream(repo_ / "build.sh") << fmt_build(lib);
    git("init -q -b main");
    git("config user.email t@example.com");
    git("config user.name test");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 16 commits; from commit 11 on, outputs 1.5x too large (`wrong`) or calls 2x as long.
  void make_history(bool wrong) {
    for (int i = 1; i <= 16; ++i) {
      std::ofstream config(repo_ / "config.h");
      config << "// step " << i << "\n#define SCALE " << (wrong && i >= 11 ? "1.5f" : "1.0f")
             << "\n#define SLOW " << (!wrong && i >= 11 ? "2.0" : "1.0") << "\n";
      if (i >= 6 && i <= 9) config << "int broken = ;\n";  // the build broke at 6, fixed at 10
      config.close();
      git("add -A");
      git("commit -q -m 'step " + std::to_string(i) + "'");
      commits_.push_back(head());
    }
  }

  static std::string fmt_build(const fs::path& lib) {
    return "c++ -std=c++20 -O1 -shared -fPIC -DBOOST_DLL_USE_STD_FS -I" CRUCIBLE_SOURCE_DIR
           "/plugins/api/include -I" CRUCIBLE_SOURCE_DIR
           "/compiler/include plugin.cpp -o crucible_backend_bis.so -L" +
           lib.string() + " -lcrucible_ops -lcrucible_ir -lcrucible_core -Wl,-rpath," +
           lib.string() + "\n";
  }
  void git(const std::string& args) {
    const auto r = run_command("git -C " + repo_.string() + " " + args);
    ASSERT_EQ(r.status, 0) << args << ": " << r.err;
  }
  std::string head() {
    auto r = run_command("git -C " + repo_.string() + " rev-parse HEAD");
    return r.out.substr(0, 40);
  }
  std::string bisect_args() const {
    return "bisect --repo " + repo_.string() + " --good " + commits_[0] + " --bad " + commits_[15] +
           " --build 'sh build.sh' --plugin-dir .";
  }

  fs::path dir_, repo_;
  std::vector<std::string> commits_;  // commits_[i]: step i + 1
};

TEST_F(Bisect, FindsTheCommitThatBrokeARunAndSkipsOnesThatDoNotBuild) {
  make_history(true);
  const auto r = run_crucible(bisect_args() +
                              " -- --suite tutorial --only sin_cos --backends bis --mode accuracy");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("first bad commit: " + commits_[10] + " step 11"), std::string::npos)
      << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("(\\d+) steps, (\\d+) skipped"))) << r.out;
  EXPECT_LE(std::stoi(m[1]), 5) << r.out;  // log2(16) = 4, plus one for a skip's neighbour
  EXPECT_GE(std::stoi(m[2]), 1) << r.out;
  EXPECT_NE(r.out.find("skip does not build"), std::string::npos) << r.out;
  // The repository is left as it was: no worktree, no bisect state, HEAD where it was.
  EXPECT_EQ(testing::count_lines(run_command("git -C " + repo_.string() + " worktree list").out),
            1);
  std::printf("%s", r.out.c_str());
  EXPECT_EQ(head(), commits_[15]);
  EXPECT_FALSE(fs::exists(repo_ / ".git" / "BISECT_LOG"));
}

TEST_F(Bisect, FindsTheCommitThatSlowedABackendByItsTimeOverEager) {
  make_history(false);
  const auto r = run_crucible(bisect_args() +
                              " --judge ratio -- --suite tutorial --only sin_cos --backends bis "
                              "--mode performance --repeat 6 --min-time-ms 50");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NE(r.out.find("first bad commit: " + commits_[10] + " step 11"), std::string::npos)
      << r.out;
  // The endpoints measured first: about 1 and 2 times eager's time.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("good time over eager ([0-9.]+)"))) << r.out;
  const double good = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("bad  time over eager ([0-9.]+)"))) << r.out;
  EXPECT_GT(std::stod(m[1]) / good, 1.5) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("(\\d+) steps, (\\d+) skipped"))) << r.out;
  EXPECT_LE(std::stoi(m[1]), 5) << r.out;
}

TEST_F(Bisect, BadInputIsOneLineAndExitTwo) {
  make_history(true);
  for (const std::string& args :
       {bisect_args(),  // neither --repro nor a run
        bisect_args() + " --repro " + (dir_ / "none").string(),
        "bisect --repo " + repo_.string() + " --good nosuchcommit --bad HEAD -- --suite tutorial",
        "bisect --repo " + repo_.string() + " --good " + commits_[15] + " --bad " + commits_[0] +
            " -- --suite tutorial",
        "bisect --repo " + dir_.string() + " --good a --bad b -- --suite tutorial",
        bisect_args() + " --judge sometimes -- --suite tutorial",
        bisect_args() + " --judge ratio --repro " + dir_.string()}) {
    const auto r = run_crucible(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << args << "\n" << r.err;
  }
}

TEST(ReproExitCode, BisectConventionRefusesAnUnknownValue) {
  const auto r = run_crucible("repro /nonexistent --exit-code sometimes");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace crucible
