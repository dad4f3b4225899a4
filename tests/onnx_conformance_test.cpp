// ONNX conformance through real runs: Debian's backend test cases (onnx-node and the pytorch and
// simple suites) on eager and codegen against their expected outputs, and the exported onnx-zoo
// models on eager, codegen and libtorch against PyTorch's outputs and fp64.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <sstream>

#include "cli_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_crucible;

struct Counts {
  int pass = 0, skipped = 0, failed = 0, skipped_without_reason = 0;
  int total() const { return pass + skipped + failed; }
};

// Runs `suite` on `backends` into a fresh store and counts each backend's statuses.
std::map<std::string, Counts> run_suite(const std::string& suite, const std::string& backends,
                                        std::string* failures) {
  const fs::path dir = testing::fresh_test_dir("onnx_conf_" + suite);
  auto r = run_crucible(fmt::format("run --suite {} --backends {} --db {} -o {}", suite, backends,
                                    (dir / "c.db").string(), (dir / "out").string()));
  EXPECT_TRUE(r.status == 0 || r.status == 1) << r.err;
  auto q = run_crucible(
      fmt::format("query --db {} --format csv \"select backend, status, error = '' from results\"",
                  (dir / "c.db").string()));
  std::map<std::string, Counts> counts;
  std::istringstream lines(q.out);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string backend, status, no_reason;
    std::getline(f, backend, ',');
    std::getline(f, status, ',');
    std::getline(f, no_reason, ',');
    Counts& c = counts[backend];
    if (status == "pass") {
      ++c.pass;
    } else if (status == "skipped") {
      ++c.skipped;
      if (no_reason == "1") ++c.skipped_without_reason;
    } else {
      ++c.failed;
    }
  }
  auto f = run_crucible(fmt::format("results 1 --failed --db {}", (dir / "c.db").string()));
  *failures = f.out;
  // The run's output holds every model's graph with its weights (2.1 GB for onnx-zoo): left in
  // /tmp by each run of the suite, they once filled this machine's disk.
  fs::remove_all(dir);
  return counts;
}

TEST(OnnxConformance, NodeCasesPassOnEagerAndCodegenAndTheRestSaySkippedWhy) {
  std::string failures;
  auto counts = run_suite("onnx-node", "eager,codegen", &failures);
  ASSERT_EQ(counts.size(), 2u);
  const Counts& eager = counts["eager"];
  const Counts& codegen = counts["codegen"];
  EXPECT_EQ(eager.total(), 932);
  // The registry covers at least 70% of the 932 cases; of those, at least 90% pass.
  const int covered = eager.total() - eager.skipped;
  EXPECT_GE(covered * 100, 70 * eager.total()) << covered;
  EXPECT_GE(eager.pass * 100, 90 * covered) << failures;
  EXPECT_EQ(eager.skipped_without_reason, 0);
  // Codegen within 2 points of eager.
  EXPECT_LE((eager.pass - codegen.pass) * 100, 2 * covered) << failures;
  EXPECT_EQ(codegen.skipped, eager.skipped);
  RecordProperty("eager_pass", eager.pass);
  RecordProperty("codegen_pass", codegen.pass);
}

TEST(OnnxConformance, PytorchAndSimpleCasesPassOrSayWhyNot) {
  for (const char* suite : {"onnx-pytorch-converted", "onnx-pytorch-operator", "onnx-simple"}) {
    std::string failures;
    auto counts = run_suite(suite, "eager,codegen", &failures);
    for (const auto& [backend, c] : counts) {
      EXPECT_EQ(c.failed, 0) << suite << " " << backend << "\n" << failures;
      EXPECT_EQ(c.skipped_without_reason, 0) << suite;
      EXPECT_GT(c.pass, 0) << suite;
    }
  }
}

TEST(OnnxZoo, EveryExportedModelPassesOnEagerCodegenAndLibtorch) {
#ifdef CRUCIBLE_LIBTORCH_BUILT
  const std::vector<std::string> backends = {"eager", "codegen", "libtorch"};
#else
  std::cout << "the libtorch peer is not built in this tree: eager and codegen only\n";
  const std::vector<std::string> backends = {"eager", "codegen"};
#endif
  std::string failures;
  auto counts = run_suite("onnx-zoo", fmt::format("{}", fmt::join(backends, ",")), &failures);
  ASSERT_EQ(counts.size(), backends.size()) << "is the onnx-zoo built? (ci/setup.sh)";
  for (const auto& [backend, c] : counts) {
    EXPECT_GE(c.total(), 17) << backend;
    EXPECT_EQ(c.pass, c.total()) << backend << "\n" << failures;
  }
}

// `crucible models` lists the ONNX suites as it lists the built-in zoo: each model imported in
// memory with its counts, and a case crucible cannot import named with the reason.
TEST(OnnxZoo, ModelsListsEveryOnnxSuiteWithItsCounts) {
  const auto zoo = run_crucible("models --suite onnx-zoo");
  ASSERT_EQ(zoo.status, 0) << zoo.err;
  // resnet50 with its batch norms folded into the convolutions by the export: torchvision's
  // 25,557,032 less their 26,560 scales and shifts.
  EXPECT_NE(zoo.out.find("resnet50               -            1     25,530,472"), std::string::npos)
      << zoo.out;
  EXPECT_EQ(zoo.out.find("not imported"), std::string::npos) << zoo.out;
  const auto node = run_crucible("models --suite onnx-node");
  ASSERT_EQ(node.status, 0) << node.err;
  EXPECT_GT(testing::count_lines(node.out), 900);
  EXPECT_NE(node.out.find("test_abs "), std::string::npos);
  EXPECT_NE(node.out.find("not imported: "), std::string::npos);
}

}  // namespace
}  // namespace crucible
