// `crucible run --mode training` end to end on the real binary, plugins and store: a suite's
// training steps judged and timed on eager and codegen, a wrong backward planted in one node
// failing and minifying to that node, and the options' and the graphs' refusals.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_util.h"
#include "crucible/ir/text_format.h"
#include "crucible/models/model_zoo.h"
#include "crucible/ops/training.h"
#include "crucible/reports/store.h"
#include "onnx_model_builder.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_crucible;

class TrainingRun : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::fresh_test_dir("crucible_training"); }
  std::string store_args() const {
    return " --db " + (dir_ / "r.db").string() + " -o " + (dir_ / "out" / "run_{run}").string();
  }
  // The first run's results by "model/backend/mode".
  std::map<std::string, reports::ResultRow> first_run_results() const {
    auto store = reports::Store::open(dir_ / "r.db");
    std::map<std::string, reports::ResultRow> got;
    for (auto& row : store->results(store->runs().at(0).id))
      got[row.model + "/" + row.backend + "/" + row.mode] = row;
    return got;
  }
  fs::path dir_;
};

TEST_F(TrainingRun, TheMlpSuiteTrainsOnEagerAndCodegenAndIsTimedPerStep) {
  auto r = run_crucible(
      "run --suite mlp --variant small --backends eager,codegen --mode training --threads 2 "
      "--repeat 3 --min-time-ms 0" +
      store_args());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, reports::ResultRow> got = first_run_results();
  for (const char* model : {"mlp.train", "dlrm.train"}) {
    for (const char* backend : {"eager", "codegen"}) {
      const std::string key = std::string(model) + "/" + backend;
      ASSERT_TRUE(got.contains(key + "/accuracy")) << key;
      EXPECT_EQ(reports::status_name(got[key + "/accuracy"].status), "pass")
          << key << got[key + "/accuracy"].error;
      ASSERT_TRUE(got.contains(key + "/performance")) << key;
      EXPECT_EQ(reports::status_name(got[key + "/performance"].status), "pass") << key;
      EXPECT_EQ(got[key + "/performance"].samples_ms.size(), 3u) << key;
    }
    EXPECT_TRUE(got[std::string(model) + "/codegen/performance"].speedup.has_value());
  }
  EXPECT_EQ(got.size(), 8u);  // no inference result beside them
  // What was judged: 3 steps' losses, gradients and parameters; what was timed: one step.
  const fs::path graphs = dir_ / "out" / "run_1" / "graphs";
  const Graph judged = load_graph_file(graphs / "mlp.mlp.train.graph");
  const Graph timed = load_graph_file(graphs / "mlp.mlp.train.step.graph");
  EXPECT_TRUE(judged.find_value("loss.3") && judged.find_value("grad.3.layers.0.weight"));
  EXPECT_TRUE(judged.params().empty());
  EXPECT_TRUE(timed.find_value("loss.1") && !timed.find_value("loss.2"));
}

// A convolution net with batch norm trains with the batch's statistics: its small variant steps
// at batch 16 (so each channel of the 1x1 last stage normalizes 16 values), and codegen's step
// passes against the fp64 reference after 1 and 3 steps, its running statistics included.
TEST_F(TrainingRun, ResNet18TrainsWithBatchStatisticsOnCodegen) {
  auto r = run_crucible(
      "run --suite vision --only resnet18 --variant small --backends codegen --mode training "
      "--threads 2 --repeat 1 --min-time-ms 0" +
      store_args());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  int seen = 0;
  for (auto& row : store->results(store->runs().at(0).id)) {
    EXPECT_EQ(row.model, "resnet18.train");
    EXPECT_EQ(row.batch_size, 16);
    EXPECT_EQ(reports::status_name(row.status), "pass") << row.backend << row.mode << row.error;
    ++seen;
  }
  EXPECT_EQ(seen, 3);  // codegen's accuracy, and eager's and codegen's step timings
  const Graph judged =
      load_graph_file(dir_ / "out" / "run_1" / "graphs" / "vision.resnet18.train.graph");
  EXPECT_TRUE(judged.find_value("buffer.3.bn1.running_mean").has_value());
}

// mobilenet_v2's relu6 masks are recomputed in the backward; at step 3 one element of a
// 16x8x16x16 mask sits 1.2e-7 from the clamp's 0 in fp64 (inside the band of 5.7e-6: 4 times the
// f32 rounding eager itself shows there), and codegen's order of additions may decide it the
// other way, moving the first conv's weight gradient by up to 6e-3. The verdict decides the graph's
// ties the other way in fp64 and passes an output one of them explains, saying which.
TEST_F(TrainingRun, MobileNetV2PassesWhereAReluMaskIsACoinFlipAtF32) {
  auto r = run_crucible(
      "run --suite vision --only mobilenet_v2 --variant small --backends codegen --mode training "
      "--threads 2 --repeat 1 --min-time-ms 0" +
      store_args());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  for (auto& row : store->results(store->runs().at(0).id)) {
    EXPECT_EQ(reports::status_name(row.status), "pass") << row.backend << row.mode << row.error;
    // Where a tie went the other way (it depends on the host's vector width), the result says so.
    if (row.mode == "accuracy" && !row.error.empty()) {
      EXPECT_EQ(row.error.rfind("pass at ties: ", 0), 0u) << row.error;
    }
  }
}

// The backward of one relu, wrong by 2x in codegen alone: the step fails accuracy and --bisect
// minifies it to that one node, named after the forward value whose gradient it computes.
// The first relu's backward in `step` (its `where` node's name), where a test plants a bug.
std::string first_relu_backward(const Graph& step) {
  for (const Node& n : step.nodes()) {
    const std::string& name = step.value(n.output).name;
    if (n.op == "where" && name.find(".bwd") != std::string::npos) {
      const std::string of = name.substr(0, name.find(".bwd"));
      const auto fwd = step.find_value(of);
      if (fwd && step.value(*fwd).node >= 0 && step.nodes()[step.value(*fwd).node].op == "relu") {
        return name;
      }
    }
  }
  return "";
}

TEST_F(TrainingRun, APlantedWrongBackwardFailsAndMinifiesToThatNode) {
  const Graph forward =
      models::build_model(models::find_model("mlp"), {models::Variant::kSmall, 0});
  const std::string planted = first_relu_backward(training_graph(forward, {}));
  ASSERT_FALSE(planted.empty());
  auto r = run_crucible(
      "run --suite mlp --only mlp --variant small --backends codegen --mode training --threads 2 "
      "--repeat 1 --min-time-ms 0 --bisect -c inject=where:times2@" +
      planted + store_args());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("fail_accuracy"), std::string::npos) << r.out;
  // The console names the first output that differs: a loss, gradient or parameter of a step.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(output \d+ %(loss|grad|param)\.\d+)")))
      << r.out;
  auto store = reports::Store::open(dir_ / "r.db");
  const auto repros = store->repros();
  ASSERT_EQ(repros.size(), 1u) << r.err;
  EXPECT_EQ(repros[0].model, "mlp.train");
  EXPECT_EQ(repros[0].nodes_after, 1);
  EXPECT_LE(repros[0].oracle_calls, 60);
  const Graph repro = load_graph_file(fs::path(repros[0].path) / "graph.graph");
  ASSERT_EQ(repro.nodes().size(), 1u);
  EXPECT_EQ(repro.value(repro.nodes()[0].output).name, planted);
  // Minified under the rule that judged it: the training tolerance, not the model's inference one.
  EXPECT_NE(testing::read_all(fs::path(repros[0].path) / "manifest.txt").find("tolerance 0.01\n"),
            std::string::npos);
  EXPECT_NE(
      testing::read_all(fs::path(repros[0].path) / "manifest.txt").find("scaled_tolerance 1\n"),
      std::string::npos);
  // And it reproduces under that rule.
  r = run_crucible("repro " + repros[0].path);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reproduced"), std::string::npos) << r.out;

  // By hand, the step the run wrote: minify notes the rule it lacks, and with --scaled-tolerance
  // reduces it to the same node under the same rule.
  const std::string written = (dir_ / "out" / "run_1" / "graphs" / "mlp.mlp.train.graph").string();
  const std::string by_hand = " --backend codegen --no-kernel-bisect -c inject=where:times2@" +
                              planted + " --db " + (dir_ / "m.db").string() + " -o ";
  // (Asked for a crash it does not have, it stops after one run of the step.)
  r = run_crucible("minify " + written + by_hand + (dir_ / "plain").string() +
                   " --signature crash --determinism 1");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("a run judges it with --scaled-tolerance"), std::string::npos) << r.err;
  const fs::path hand = dir_ / "hand";
  r = run_crucible("minify " + written + by_hand + hand.string() + " --scaled-tolerance");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("a run judges it"), std::string::npos) << r.err;
  EXPECT_EQ(load_graph_file(hand / "graph.graph").nodes().size(), 1u) << r.out;
  const std::string manifest = testing::read_all(hand / "manifest.txt");
  EXPECT_NE(manifest.find("tolerance 0.01\n"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("scaled_tolerance 1\n"), std::string::npos) << manifest;
}

// Cosim judges a node at the scale the failed verdict took: the step's outputs' (loss, gradients,
// parameters), not every intermediate's. Here the forward scales by 1000 and back, so intermediates
// are ~1000x the outputs; at their scale a doubled gradient would pass, no node would be named,
// and the minifier would fall back to bisecting the whole step.
TEST_F(TrainingRun, CosimNamesAWrongBackwardAtTheStepsOwnScale) {
  const Graph forward = parse_graph(
      "graph scaled(%x: f32[16,32]) {\n"
      "  param %w: f32[32,8] = randn()\n"
      "  %h = matmul(%x, %w)\n"
      "  %k = full(shape=[1], value=1000.0, dtype=f32)\n"
      "  %s = mul(%h, %k)\n"
      "  %y = div(%s, %k)\n"
      "  return %y\n}\n");
  TrainingOptions options;
  options.loss = LossKind::kMse;
  const Graph step = training_graph(forward, options);
  std::string planted;
  for (const Node& n : step.nodes()) {
    const std::string& name = step.value(n.output).name;
    if (n.op == "mul" && name.rfind("s.bwd", 0) == 0) planted = name;  // d(loss)/d(h), ~1
  }
  ASSERT_FALSE(planted.empty()) << print_graph(step);
  save_graph_file(step, dir_ / "step.graph");
  auto r = run_crucible("minify " + (dir_ / "step.graph").string() +
                        " --backend codegen --no-kernel-bisect --scaled-tolerance "
                        "-c inject=mul:times2@" +
                        planted + " --db " + (dir_ / "m.db").string() + " -o " +
                        (dir_ / "repro").string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cosim: first diverging node %" + planted), std::string::npos) << r.out;
  const Graph repro = load_graph_file(dir_ / "repro" / "graph.graph");
  ASSERT_EQ(repro.nodes().size(), 1u);
  EXPECT_EQ(repro.value(repro.nodes()[0].output).name, planted);
}

// An imported ONNX model trains with its initializers as the parameters: they start from the
// file's values (written beside the imported graph, read back as inputs of the step).
TEST_F(TrainingRun, AnImportedOnnxModelTrainsItsInitializers) {
  testing::OnnxModelBuilder b;
  b.input("x", {4, 6});
  std::vector<float> w1(48), b1(8), w2(24);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.05f * static_cast<float>(i % 7) - 0.15f;
  for (size_t i = 0; i < b1.size(); ++i) b1[i] = 0.01f * static_cast<float>(i);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.1f - 0.02f * static_cast<float>(i % 9);
  b.initializer("w1", {8, 6}, w1);
  b.initializer("b1", {8}, b1);
  b.initializer("w2", {3, 8}, w2);
  testing::OnnxModelBuilder::attr_int(b.node("Gemm", {"x", "w1", "b1"}, {"h"}), "transB", 1);
  b.node("Relu", {"h"}, {"r"});
  testing::OnnxModelBuilder::attr_int(b.node("Gemm", {"r", "w2"}, {"y"}), "transB", 1);
  b.output("y");
  const fs::path onnx = b.save(dir_ / "mlp.onnx");
  auto r = run_crucible("run --graph " + onnx.string() +
                        " --backends eager,codegen --mode training --threads 2 --repeat 1 "
                        "--min-time-ms 0" +
                        store_args());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  int passed = 0;
  for (auto& row : store->results(store->runs().at(0).id)) {
    EXPECT_EQ(row.model, "mlp.train");
    passed += reports::status_name(row.status) == "pass";
  }
  EXPECT_EQ(passed, 4);
  // The step starts from the initializers' values: its parameter inputs read their files.
  for (const auto& entry : fs::directory_iterator(dir_ / "out" / "run_1" / "graphs")) {
    if (entry.path().filename().string().find(".train.graph") == std::string::npos) continue;
    const Graph step = load_graph_file(entry.path());
    const auto w = step.find_value("w1");
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(step.value(*w).kind, ValueKind::kInput);
    EXPECT_EQ(step.value(*w).init.kind, "file");
    const Tensor first = make_inputs(step, 0)[static_cast<size_t>(
        std::find(step.inputs().begin(), step.inputs().end(), *w) - step.inputs().begin())];
    EXPECT_FLOAT_EQ(static_cast<float>(first.get(1)), w1[1]);
  }
}

TEST_F(TrainingRun, ModelsThatCannotTrainFailToLoadSayingWhy) {
  std::ofstream(dir_ / "reflect.graph") << "graph p(%x: f32[2,3]) {\n"
                                           "  param %w: f32[2,3] = ones()\n"
                                           "  %y = mul(%x, %w)\n"
                                           "  %z = pad(%y, pads=[0, 1, 0, 1], mode=\"reflect\")\n"
                                           "  return %z\n}\n";
  std::ofstream(dir_ / "noparam.graph") << "graph n(%x: f32[2,3]) {\n  %y = relu(%x)\n"
                                           "  return %y\n}\n";
  auto r = run_crucible("run --graph " + (dir_ / "reflect.graph").string() + " --graph " +
                        (dir_ / "noparam.graph").string() + " --mode training" + store_args());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  auto store = reports::Store::open(dir_ / "r.db");
  int seen = 0;
  for (auto& row : store->results(store->runs().at(0).id)) {
    EXPECT_EQ(reports::status_name(row.status), "fail_to_load") << row.model;
    if (row.model == "reflect.train") {
      EXPECT_NE(row.error.find("pad mode=reflect has no gradient rule"), std::string::npos)
          << row.error;
      ++seen;
    }
    if (row.model == "noparam.train") {
      EXPECT_NE(row.error.find("no floating parameter"), std::string::npos) << row.error;
      ++seen;
    }
  }
  EXPECT_EQ(seen, 4);  // accuracy and performance of each
}

// --mode all: one run holds each model's inference results and, after them, its training
// step's, as the manifest's train_* keys say (a training batch of its own, a skipped training).
TEST_F(TrainingRun, ModeAllRunsInferenceThenTrainingByTheManifestsTrainKeys) {
  fs::create_directories(dir_ / "nightly");
  std::ofstream(dir_ / "nightly" / "suite.manifest")
      << "model mlp builtin=mlp train_batch_size=8\n"
         "model dlrm builtin=dlrm train_skip=\"its embedding bags are frozen in production\"\n";
  auto r = run_crucible("run --suite " + (dir_ / "nightly" / "suite.manifest").string() +
                        " --variant small --backends eager,codegen --mode all --threads 2 "
                        "--repeat 1 --min-time-ms 0 --train-steps 2" +
                        store_args());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, reports::ResultRow> got = first_run_results();
  EXPECT_EQ(got.size(), 16u);  // 4 entries x (2 accuracy + 2 performance)
  for (const char* model : {"mlp", "dlrm", "mlp.train"}) {
    for (const char* key : {"/eager/accuracy", "/codegen/accuracy", "/codegen/performance"}) {
      const auto row = got.find(model + std::string(key));
      ASSERT_NE(row, got.end()) << model << key;
      EXPECT_EQ(reports::status_name(row->second.status), "pass")
          << model << key << row->second.error;
    }
  }
  EXPECT_EQ(got["mlp.train/codegen/accuracy"].batch_size, 8);
  EXPECT_NE(got["mlp/codegen/accuracy"].batch_size, 8);
  EXPECT_EQ(reports::status_name(got["dlrm.train/codegen/accuracy"].status), "skipped");
  EXPECT_EQ(got["dlrm.train/codegen/accuracy"].error,
            "its embedding bags are frozen in production");
  // The inference graph, the training entry's forward and its step are three files.
  const fs::path graphs = dir_ / "out" / "run_1" / "graphs";
  EXPECT_TRUE(load_graph_file(graphs / "nightly.mlp.graph").params().size() > 0);
  EXPECT_FALSE(load_graph_file(graphs / "nightly.mlp.train.forward.graph").inputs().empty());
  const Graph step = load_graph_file(graphs / "nightly.mlp.train.graph");
  EXPECT_TRUE(step.find_value("loss.2") && !step.find_value("loss.3"));
  EXPECT_EQ(reports::Store::open(dir_ / "r.db")->runs().at(0).mode, "all");
}

// A training step given as a file (crucible export --train-steps) is judged by the training rule,
// as --mode training judges it: an error of 1e-3 of the loss passes it where the inference rule
// (1e-4) fails the same error on the forward alone; 10% still fails the step.
TEST_F(TrainingRun, AStepGivenAsAGraphFileIsJudgedByTheTrainingRule) {
  const fs::path step = dir_ / "mlp_step.graph", forward = dir_ / "mlp_forward.graph";
  auto e = run_crucible("export mlp --variant small --train-steps 1 -o " + step.string());
  ASSERT_EQ(e.status, 0) << e.err;
  e = run_crucible("export mlp --variant small -o " + forward.string());
  ASSERT_EQ(e.status, 0) << e.err;
  const std::string step_name = load_graph_file(step).name();
  const std::string forward_name = load_graph_file(forward).name();
  // The first output's every row moved by E relative (faulty's nudge:E); accuracy only.
  const auto verdict = [&](const fs::path& file, const std::string& name, const char* by) {
    fs::remove_all(dir_ / "r.db");
    auto r = run_crucible(fmt::format(
        "run --graph {} --backends faulty --plugin-path {} -c faulty:fault.{}=nudge:{}{}",
        file.string(), CRUCIBLE_TEST_PLUGIN_DIR, name, by, store_args()));
    std::map<std::string, reports::ResultRow> got = first_run_results();
    const std::string key = file.stem().string() + "/faulty/accuracy";
    EXPECT_TRUE(got.contains(key)) << r.out << r.err;
    return got.contains(key)
               ? std::string(reports::status_name(got[key].status)) + " " + got[key].error
               : std::string();
  };
  const std::string small = verdict(step, step_name, "1e-3");
  EXPECT_EQ(small.rfind("pass", 0), 0u) << small;
  const std::string large = verdict(step, step_name, "1e-1");
  EXPECT_EQ(large.rfind("fail_accuracy", 0), 0u) << large;
  const std::string inference = verdict(forward, forward_name, "1e-3");
  EXPECT_EQ(inference.rfind("fail_accuracy", 0), 0u) << inference;

  // A step is not differentiated again: its training entry is skipped, saying why.
  fs::remove_all(dir_ / "r.db");
  auto r = run_crucible("run --graph " + step.string() + " --backends eager --mode training" +
                        store_args());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::map<std::string, reports::ResultRow> got = first_run_results();
  ASSERT_TRUE(got.contains("mlp_step.train/eager/accuracy")) << r.out;
  EXPECT_EQ(reports::status_name(got["mlp_step.train/eager/accuracy"].status), "skipped");
  EXPECT_NE(got["mlp_step.train/eager/accuracy"].error.find("a training step already"),
            std::string::npos);

  // --bisect minifies a step given as a file by the rule that judged it, and the repro carries it.
  fs::remove_all(dir_ / "r.db");
  r = run_crucible("run --graph " + step.string() +
                   " --backends codegen --bisect -c inject=where:times2@" +
                   first_relu_backward(load_graph_file(step)) + store_args());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const auto repros = reports::Store::open(dir_ / "r.db")->repros();
  ASSERT_EQ(repros.size(), 1u) << r.out << r.err;
  const std::string manifest = testing::read_all(fs::path(repros[0].path) / "manifest.txt");
  EXPECT_NE(manifest.find("tolerance 0.01\n"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("scaled_tolerance 1\n"), std::string::npos) << manifest;
}

TEST_F(TrainingRun, BadTrainingOptionsAreOneLineAndExitTwo) {
  const std::string base = "run --suite mlp --variant small" + store_args();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --mode training --train-steps 0", "--train-steps must be between 1 and 100"},
      {" --mode training --optimizer lamb", "--optimizer: unknown optimizer 'lamb'"},
      {" --mode training --loss hinge", "--loss: unknown loss 'hinge'"},
      {" --mode training --lr -1", "--lr must be a positive number"},
      {" --mode training --momentum 1", "--momentum must be in [0, 1)"},
      {" --mode training --weight-decay -0.5", "--weight-decay must be a number >= 0"},
      {" --mode accuracy --train-steps 2", "--train-steps applies to training"},
      {" --mode both --optimizer adamw", "--optimizer applies to training"},
      {" --mode performance --lr 0.1", "--lr applies to training: give --mode training or all"},
      {" --mode train", "--mode must be accuracy, performance, both, training or all"},
      {" --mode training --recompute all", "--recompute must be cheap or none"},
      {" --mode accuracy --recompute none", "--recompute applies to training"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run_crucible(base + args);
    EXPECT_EQ(r.status, 2) << args << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "r.db"));
}

}  // namespace
}  // namespace crucible
