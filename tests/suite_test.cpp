// Suite manifests: parsing, errors with positions, model selection by name, regex and shard.
#include "suite.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "crucible/core/error.h"
#include "training_models.h"

namespace crucible {
namespace {

const char* kManifest =
    "# a comment\n"
    "model alpha graph=a.graph batch_size=8 tolerance=1e-3\n"
    "\n"
    "model beta  graph=b.graph skip=\"needs conv2d\"   # trailing comment\n"
    "model gamma graph=/abs/c.graph xfail=\"bf16 \\\"rounding\\\"\" cosine=true\n"
    "model delta graph=d.graph\n";

TEST(Suite, ParsesModelsWithTheirSettings) {
  Suite s = parse_suite(kManifest, "/suites/demo/suite.manifest");
  EXPECT_EQ(s.name, "demo");
  ASSERT_EQ(s.models.size(), 4u);
  EXPECT_EQ(s.models[0].graph, "/suites/demo/a.graph");
  EXPECT_EQ(s.models[0].batch_size, 8);
  EXPECT_DOUBLE_EQ(s.models[0].tolerance, 1e-3);
  EXPECT_EQ(s.models[1].skip, "needs conv2d");
  EXPECT_EQ(s.models[2].graph, "/abs/c.graph");
  EXPECT_EQ(s.models[2].xfail, "bf16 \"rounding\"");
  EXPECT_TRUE(s.models[2].cosine);
  EXPECT_DOUBLE_EQ(s.models[3].tolerance, 1e-4);
}

// The train_* keys hold what the model's training entry is (training_models.h): its own batch,
// tolerance, skip and xfail; the inference entry keeps the model's.
TEST(Suite, TrainKeysShapeTheTrainingEntryAlone) {
  Suite s = parse_suite(
      "model a graph=a.graph batch_size=8 xfail=\"int8 path\" train_batch_size=32 "
      "train_tolerance=0.05\n"
      "model b graph=b.graph train_skip=\"no gradient for topk's indices\" train_xfail=\"nan\"\n"
      "model c graph=c.graph skip=\"needs conv2d\" tolerance=1e-3\n",
      "/suites/demo/suite.manifest");
  ASSERT_EQ(s.models.size(), 3u);
  const std::vector<ModelEntry> both = with_training_entries(s.models, true, true);
  ASSERT_EQ(both.size(), 6u);
  EXPECT_EQ(both[0].name, "a");
  EXPECT_FALSE(both[0].training);
  EXPECT_EQ(both[0].batch_size, 8);
  EXPECT_EQ(both[0].xfail, "int8 path");
  const ModelEntry& a = both[1];
  EXPECT_EQ(a.name, "a.train");
  EXPECT_TRUE(a.training && a.scaled_tolerance);
  EXPECT_EQ(a.batch_size, 32);
  EXPECT_DOUBLE_EQ(a.tolerance, 0.05);
  EXPECT_EQ(a.xfail, "");  // inference's xfail says nothing of the gradients
  EXPECT_EQ(both[2].skip, "");
  EXPECT_EQ(both[3].skip, "no gradient for topk's indices");
  EXPECT_EQ(both[3].xfail, "nan");
  EXPECT_DOUBLE_EQ(both[3].tolerance, kTrainingTolerance);
  EXPECT_EQ(both[5].skip, "needs conv2d");    // no forward, no training
  EXPECT_DOUBLE_EQ(both[5].tolerance, 1e-3);  // the manifest's own tolerance holds
  // Training alone: each model once, as its training entry; inference alone: untouched.
  const std::vector<ModelEntry> train = with_training_entries(s.models, false, true);
  ASSERT_EQ(train.size(), 3u);
  EXPECT_EQ(train[0].name, "a.train");
  EXPECT_EQ(with_training_entries(s.models, true, false)[0].name, "a");
  // An entry made a training entry twice is named once.
  ModelEntry twice = s.models[0];
  as_training_entry(twice);
  as_training_entry(twice);
  EXPECT_EQ(twice.name, "a.train");
}

TEST(Suite, OnnxCasesListEveryCaseFolderWithItsData) {
  const auto dir = std::filesystem::temp_directory_path() / "crucible_suite_onnx_cases";
  std::filesystem::remove_all(dir);
  for (const char* c : {"test_b", "test_a", "not_a_case"})
    std::filesystem::create_directories(dir / c);
  std::ofstream(dir / "test_a" / "model.onnx") << "x";
  std::ofstream(dir / "test_b" / "model.onnx") << "x";
  std::filesystem::create_directories(dir / "test_b" / "test_data_set_0");
  ::setenv("CRUCIBLE_TEST_CASES_DIR", dir.c_str(), 1);
  const auto manifest = dir.parent_path() / "m" / "suite.manifest";
  Suite s = parse_suite("onnx_cases ${CRUCIBLE_TEST_CASES_DIR} rtol=0.01 fp64=true\n", manifest);
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].name, "test_a");
  EXPECT_EQ(s.models[0].onnx, dir / "test_a" / "model.onnx");
  EXPECT_TRUE(s.models[0].onnx_data.empty());
  EXPECT_EQ(s.models[1].onnx_data, dir / "test_b" / "test_data_set_0");
  EXPECT_DOUBLE_EQ(s.models[1].rtol, 0.01);
  EXPECT_DOUBLE_EQ(s.models[1].atol, 1e-7);
  EXPECT_TRUE(s.models[1].fp64_check);
  // A default for an unset variable, and the same cases twice is an error.
  Suite d = parse_suite("onnx_cases ${CRUCIBLE_TEST_NOT_SET:-" + dir.string() + "}\n", manifest);
  EXPECT_EQ(d.models.size(), 2u);
  EXPECT_THROW(
      parse_suite("onnx_cases " + dir.string() + "\nonnx_cases " + dir.string() + "\n", manifest),
      Error);
}

TEST(Suite, ErrorsNameFileLineAndColumn) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"modl a graph=a.graph\n", "m.manifest:1:1: expected 'model' or 'onnx_cases', got 'modl'"},
      {"model a graph=a.graph\nmodel a graph=b.graph\n", "m.manifest:2:7: model 'a' listed twice"},
      {"model a graph=a.graph tol=1\n",
       "m.manifest:1:23: unknown key 'tol' (expected graph, builtin, onnx, data, batch_size, "
       "image_size, tolerance, cosine, skip, xfail, train_batch_size, train_tolerance, train_skip "
       "or train_xfail)"},
      {"model a graph=a.graph train_batch_size=0\n",
       "m.manifest:1:23: train_batch_size must be an integer from 1 to 2^30"},
      {"model a graph=a.graph train_batch_size=4.5\n",
       "m.manifest:1:23: train_batch_size must be an integer from 1 to 2^30"},
      {"model a graph=a.graph train_tolerance=-1\n",
       "m.manifest:1:23: train_tolerance must be positive"},
      {"model a graph=a.graph train_tolerance=nan\n",
       "m.manifest:1:23: train_tolerance must be a finite number, got 'nan'"},
      {"model a builtin=resnet18 image_size=16\n",
       "m.manifest:1:26: image_size must be an integer from 32 to 4096"},
      {"model a graph=a.graph image_size=128\n",
       "m.manifest:1:1: image_size=N goes with builtin=MODEL"},
      {"model a builtin=gpt2 image_size=128\n",
       "m.manifest:1:1: image_size=N applies to the vision models; 'gpt2' takes no image"},
      {"model a graph=a.graph batch_size=0\n",
       "m.manifest:1:23: batch_size must be an integer from 1 to 2^30"},
      // Numbers strtod reads that no manifest means: NaN and infinities, and a batch past int64
      // (converting it would be undefined behaviour).
      {"model a graph=a.graph batch_size=nan\n",
       "m.manifest:1:23: batch_size must be a finite number, got 'nan'"},
      {"model a graph=a.graph batch_size=1e300\n",
       "m.manifest:1:23: batch_size must be an integer from 1 to 2^30"},
      {"model a graph=a.graph batch_size=2.5\n",
       "m.manifest:1:23: batch_size must be an integer from 1 to 2^30"},
      {"model a graph=a.graph tolerance=inf\n",
       "m.manifest:1:23: tolerance must be a finite number, got 'inf'"},
      {"onnx_cases /tmp atol=-inf\n", "m.manifest:1:17: atol must be a finite number, got '-inf'"},
      {"model a graph=a.graph tolerance=x\n",
       "m.manifest:1:23: tolerance must be a finite number, got 'x'"},
      {"model a\n",
       "m.manifest:1:1: model 'a' needs exactly one of graph=FILE, builtin=MODEL and onnx=FILE"},
      {"model a graph=a.graph data=d\n", "m.manifest:1:1: data=DIR goes with onnx=FILE"},
      {"onnx_cases\n", "m.manifest:1:1: expected 'onnx_cases DIR [rtol=X] [atol=X] [fp64=true]'"},
      {"onnx_cases /nonexistent/x\n",
       "m.manifest:1:12: /nonexistent/x: onnx_cases folder does not exist"},
      {"onnx_cases ${CRUCIBLE_TEST_UNSET_VAR}\n",
       "m.manifest:1:12: ${CRUCIBLE_TEST_UNSET_VAR} in a path, and CRUCIBLE_TEST_UNSET_VAR is not "
       "set"},
      {"onnx_cases /tmp rtol=x\n", "m.manifest:1:17: rtol must be a finite number, got 'x'"},
      {"onnx_cases /tmp fp64=yes\n",
       "m.manifest:1:17: unknown onnx_cases option 'fp64=yes' (expected rtol=X, atol=X or "
       "fp64=true|false)"},
      {"model a graph=a.graph skip=\"oops\n", "m.manifest:1:28: unterminated string"},
      {"model a graph=a.graph batch\n", "m.manifest:1:23: expected key=value, got 'batch'"},
  };
  for (const auto& c : cases) {
    try {
      parse_suite(c.text, "m.manifest");
      ADD_FAILURE() << c.text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(Suite, SelectionByOnlyFilterExcludeAndShard) {
  std::vector<Suite> suites{parse_suite(kManifest, "/s/demo/suite.manifest")};
  auto names = [](const std::vector<ModelEntry>& ms) {
    std::string out;
    for (const auto& m : ms) out += m.name + " ";
    return out;
  };
  ModelFilter all;
  EXPECT_EQ(names(select_models(suites, all)), "alpha beta gamma delta ");
  ModelFilter only;
  only.only = {"gamma", "alpha"};
  EXPECT_EQ(names(select_models(suites, only)), "alpha gamma ");
  ModelFilter re;
  re.include = std::regex("a$");
  re.exclude = std::regex("^g");
  EXPECT_EQ(names(select_models(suites, re)), "alpha beta delta ");
  ModelFilter s0, s1;
  parse_shard("0/2", s0);
  parse_shard("1/2", s1);
  EXPECT_EQ(names(select_models(suites, s0)), "alpha gamma ");
  EXPECT_EQ(names(select_models(suites, s1)), "beta delta ");
  ModelFilter missing;
  missing.only = {"omega"};
  EXPECT_THROW(select_models(suites, missing), Error);
  for (const char* bad : {"2/2", "-1/2", "1", "a/b", "0/0", "1/2x"}) {
    ModelFilter f;
    EXPECT_THROW(parse_shard(bad, f), Error) << bad;
  }
}

TEST(Suite, TutorialSuiteIsFoundAndComplete) {
  Suite s = find_suite("tutorial", suite_search_path({}));
  EXPECT_EQ(s.models.size(), 5u);
  for (const auto& m : s.models) EXPECT_TRUE(std::filesystem::exists(m.graph)) << m.graph;
}

}  // namespace
}  // namespace crucible
