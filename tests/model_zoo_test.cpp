// The built-in model zoo: exact parameter counts of the reference architectures (the check that
// each architecture is right), every variant builds and round-trips through the .graph format,
// manifests name builtins, and `crucible models/export/run` serve them end to end.
#include "crucible/models/model_zoo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_util.h"
#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"
#include "crucible/reports/store.h"
#include "suite.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using models::Variant;
using testing::run_crucible;

int64_t trainable(const std::string& name) {
  return models::graph_stats(models::build_model(models::find_model(name), {Variant::kFull, 1}))
      .trainable_params;
}

// Figures from the reference implementations: HF transformers' BertEncoder (12 layers) and
// GPT2LMHeadModel with its LM head tied to the token embedding.
TEST(ModelZoo, TransformerParameterCountsMatchTheReferences) {
  EXPECT_EQ(trainable("bert_base"), 85'054'464);
  EXPECT_EQ(trainable("gpt2"), 124'439'808);
}

// torchvision's figures: trainable parameters only, batch-norm running statistics excluded.
TEST(ModelZoo, VisionParameterCountsMatchTorchvision) {
  EXPECT_EQ(trainable("resnet18"), 11'689'512);
  EXPECT_EQ(trainable("resnet50"), 25'557'032);
  EXPECT_EQ(trainable("mobilenet_v2"), 3'504'872);
  EXPECT_EQ(trainable("densenet121"), 7'978'856);
}

TEST(ModelZoo, BatchNormRunningStatisticsAreBuffersUnlessUsedElsewhere) {
  Graph g = parse_graph(R"(graph bn(%x: f32[2,4,4,3]) {
  param %w: f32[3] = ones()
  param %b: f32[3] = zeros()
  param %m: f32[3] = zeros()
  param %v: f32[3] = ones()
  param %shared: f32[3] = ones()
  %t = permute(%x, dims=[0, 3, 1, 2])
  %y = batch_norm(%t, %w, %b, %m, %v, eps=1e-05)
  %z = batch_norm(%y, %w, %b, %m, %shared, eps=1e-05)
  %p = permute(%z, dims=[0, 2, 3, 1])
  %s = mul(%p, %shared)
  return %s
}
)");
  const auto st = models::graph_stats(g);
  EXPECT_EQ(st.trainable_params, 9);  // w, b and `shared`, which a mul also reads
  EXPECT_EQ(st.buffer_params, 6);     // m and v
  EXPECT_EQ(st.nodes, 5);
}

TEST(ModelZoo, MultiplyAddsOfGemmsAndConvolutionsMatchThePublishedCount) {
  // ResNet-18 at 224x224 is 1.82 GMACs an image (torchvision's reference figure, rounded).
  const auto st =
      models::graph_stats(models::build_model(models::find_model("resnet18"), {Variant::kFull, 1}));
  EXPECT_NEAR(st.cost.macs / 1e9, 1.82, 0.01);
}

TEST(ModelZoo, MobileBertHasTheTutorialsLinearAndBmmCounts) {
  // The tutorial's profile: 362 linear calls and 48 bmm calls per forward.
  Graph g = models::build_model(models::find_model("mobilebert"), {Variant::kFull, 1});
  int linears = 0, matmuls = 0;
  for (const Node& n : g.nodes()) {
    linears += n.op == "linear";
    matmuls += n.op == "matmul";
  }
  EXPECT_EQ(linears, 362);
  EXPECT_EQ(matmuls, 48);
}

TEST(ModelZoo, EveryModelBuildsInBothVariantsAndRoundTrips) {
  for (const models::ModelSpec& spec : models::model_zoo()) {
    for (Variant v : {Variant::kSmall, Variant::kFull}) {
      SCOPED_TRACE(fmt::format("{} {}", spec.name, models::variant_name(v)));
      Graph g = models::build_model(spec, {v, 0});
      ASSERT_NO_THROW(verify(g));
      EXPECT_EQ(g.name(), spec.name);
      ASSERT_FALSE(g.inputs().empty());
      EXPECT_EQ(g.value(g.inputs()[0]).type.shape[0], spec.default_batch(v));
      for (ValueId p : g.params()) EXPECT_FALSE(g.value(p).init.empty()) << g.value(p).name;
      const std::string text = print_graph(g);
      EXPECT_EQ(print_graph(parse_graph(text)), text);
    }
  }
}

TEST(ModelZoo, SmallVariantsAreSmallerAndBatchIsHonoured) {
  for (const models::ModelSpec& spec : models::model_zoo()) {
    SCOPED_TRACE(spec.name);
    const auto full = models::graph_stats(models::build_model(spec, {Variant::kFull, 1}));
    const auto small = models::graph_stats(models::build_model(spec, {Variant::kSmall, 1}));
    EXPECT_LT(small.trainable_params, full.trainable_params);
    EXPECT_LT(small.cost.flops, full.cost.flops);
    Graph g = models::build_model(spec, {Variant::kSmall, 3});
    for (ValueId in : g.inputs()) EXPECT_EQ(g.value(in).type.shape[0], 3);
  }
}

// image_size sets a vision model's input side (the torch.compile tutorial's 128x128) and only
// theirs; the classifier's input stays the last stage's width (the adaptive pool).
TEST(ModelZoo, VisionModelsTakeAnImageSize) {
  for (const char* name : {"resnet18", "resnet50", "mobilenet_v2", "densenet121"}) {
    SCOPED_TRACE(name);
    const Graph g = models::build_model(models::find_model(name), {Variant::kSmall, 2, 64});
    EXPECT_EQ(shape_str(g.value(g.inputs()[0]).type.shape), "[2,3,64,64]");
    const Graph base = models::build_model(models::find_model(name), {Variant::kSmall, 2});
    EXPECT_EQ(g.value(g.outputs()[0]).type, base.value(base.outputs()[0]).type);
    EXPECT_GT(models::graph_stats(g).cost.flops, 3 * models::graph_stats(base).cost.flops);
  }
  EXPECT_THROW(models::build_model(models::find_model("gpt2"), {Variant::kSmall, 2, 64}), Error);
  EXPECT_THROW(models::build_model(models::find_model("resnet18"), {Variant::kSmall, 2, 16}),
               Error);
}

TEST(ModelZoo, ParametersAreDeterministicAndDistinct) {
  const auto& spec = models::find_model("bert_base");
  Graph a = models::build_model(spec, {Variant::kSmall, 0});
  Graph b = models::build_model(spec, {Variant::kSmall, 0});
  EXPECT_EQ(print_graph(a), print_graph(b));
  // Two random weights of the same shape must not share a seed (identical Q and K would hide bugs).
  auto q = a.find_value("encoder.layer.0.attention.self.query.weight");
  auto k = a.find_value("encoder.layer.0.attention.self.key.weight");
  ASSERT_TRUE(q && k);
  EXPECT_NE(a.value(*q).init, a.value(*k).init);
}

TEST(ModelZoo, BadRequestsAreErrors) {
  try {
    models::find_model("resnet19");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no built-in model 'resnet19' (known: mobilebert"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(models::parse_variant("medium"), Error);
  EXPECT_THROW(models::build_model(models::find_model("mlp"), {Variant::kSmall, -2}), Error);
}

TEST(ModelZoo, ManifestsNameBuiltins) {
  const fs::path m = "/tmp/zoo/suite.manifest";
  Suite s =
      parse_suite("model a builtin=mlp\nmodel b builtin=gpt2 tolerance=0.01 batch_size=3\n", m);
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].builtin, "mlp");
  EXPECT_TRUE(s.models[0].graph.empty());
  EXPECT_DOUBLE_EQ(s.models[1].tolerance, 0.01);
  EXPECT_EQ(s.models[1].batch_size, 3);
  auto error_of = [&](const std::string& text) {
    try {
      parse_suite(text, m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("model a builtin=resnet19\n").substr(0, 41),
            "/tmp/zoo/suite.manifest:1:9: no built-in ");
  EXPECT_EQ(
      error_of("model a builtin=mlp graph=x.graph\n"),
      "/tmp/zoo/suite.manifest:1:1: model 'a' needs exactly one of graph=FILE, builtin=MODEL and "
      "onnx=FILE");
}

TEST(ModelZooCli, ModelsPrintsParameterCounts) {
  auto r = run_crucible("models --suite transformer");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("85,054,464"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("124,439,808"), std::string::npos) << r.out;
  auto bad = run_crucible("models --variant huge");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(testing::count_lines(bad.err), 1) << bad.err;
}

TEST(ModelZooCli, ExportedGraphRunsAsAModel) {
  const fs::path dir = fs::temp_directory_path() / ("crucible_zoo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "mlp_small.graph";
  auto ex =
      run_crucible(fmt::format("export mlp --variant small --batch-size 5 -o {}", file.string()));
  ASSERT_EQ(ex.status, 0) << ex.err;
  Graph g = load_graph_file(file);
  EXPECT_EQ(g.value(g.inputs()[0]).type.shape, (Shape{5, 64}));
  auto run =
      run_crucible(fmt::format("run --graph {} --db {} --output-dir {} --threads 1", file.string(),
                               (dir / "r.db").string(), (dir / "out").string()));
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("graphs/mlp_small"), std::string::npos) << run.out;
  auto missing = run_crucible("export nosuchmodel");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("no built-in model 'nosuchmodel'"), std::string::npos);
  fs::remove_all(dir);
}

// The small variants of every suite on both backends, through real workers: each result passes
// and the built graph that the workers ran is kept with the run's output.
TEST(ModelZooCli, SmallSuitesPassOnEagerAndCodegen) {
  const fs::path dir =
      fs::temp_directory_path() / ("crucible_zoo_run_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto r = run_crucible(
      fmt::format(
          "run --suite transformer,vision,mlp --variant small --backends eager,codegen --mode "
          "accuracy --threads 2 --db {} --output-dir {}",
          (dir / "r.db").string(), (dir / "out").string()),
      fmt::format("CRUCIBLE_CACHE_DIR={}", (dir / "cache").string()));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  auto store = reports::Store::open(dir / "r.db");
  auto results = store->results(store->runs().back().id);
  EXPECT_EQ(results.size(), 18u);
  for (const auto& row : results)
    EXPECT_EQ(row.status, reports::Status::kPass)
        << row.model << " " << row.backend << ": " << row.error;
  EXPECT_TRUE(fs::exists(dir / "out" / "graphs" / "transformer.gpt2.graph"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible
