// The cost rules behind every roofline figure: per-op FLOPs and bytes against hand counts (GEMMs,
// grouped and depthwise convolutions, normalization, pools, views, gathers), a graph's compulsory
// traffic through views, and whole models against their published multiply-add counts.
#include "crucible/ir/graph_cost.h"

#include <gtest/gtest.h>

#include "crucible/ir/text_format.h"
#include "crucible/models/model_zoo.h"

namespace crucible {
namespace {

using models::Variant;

// The cost of the graph's only (or last) node.
OpCost last_node_cost(const std::string& text) {
  const Graph g = parse_graph(text);
  return node_cost(g, static_cast<int>(g.nodes().size()) - 1);
}

TEST(GraphCost, GemmsCountTwoFlopsPerMultiplyAdd) {
  // [2,3,4] x [4,5]: 2*3*5 results of a 4-term dot product; bias adds one per result.
  OpCost mm = last_node_cost(
      "graph g(%a: f32[2,3,4], %b: f32[4,5]) {\n  %y = matmul(%a, %b)\n  return %y\n}\n");
  EXPECT_EQ(mm.macs, 120);
  EXPECT_EQ(mm.flops, 240);
  EXPECT_EQ(mm.reads, (std::vector<double>{96, 80}));
  EXPECT_EQ(mm.writes, 120);
  OpCost lin = last_node_cost(
      "graph g(%x: f32[4,5], %w: f32[3,5], %b: f32[3]) {\n  %y = linear(%x, %w, %b)\n"
      "  return %y\n}\n");
  EXPECT_EQ(lin.macs, 60);
  EXPECT_EQ(lin.flops, 132);
  EXPECT_EQ(lin.bytes(), 4 * (20 + 15 + 3 + 12));
}

TEST(GraphCost, ConvolutionsCountTheirGroupsWindowsAndDtype) {
  // Grouped: [2,8,10,10] with [16,4,3,3], groups 2, same padding: 3200 results x 36 terms.
  OpCost grouped = last_node_cost(
      "graph g(%x: f32[2,8,10,10], %w: f32[16,4,3,3]) {\n"
      "  %y = conv2d(%x, %w, padding=[1, 1], groups=2)\n  return %y\n}\n");
  EXPECT_EQ(grouped.macs, 3200 * 36);
  EXPECT_EQ(grouped.flops, 2 * 3200 * 36);
  // Depthwise, strided, with bias: [1,32,16,16] -> [1,32,8,8], 9 terms each, f64.
  OpCost depthwise = last_node_cost(
      "graph g(%x: f64[1,32,16,16], %w: f64[32,1,3,3], %b: f64[32]) {\n"
      "  %y = conv2d(%x, %w, %b, stride=[2, 2], padding=[1, 1], groups=32)\n  return %y\n}\n");
  EXPECT_EQ(depthwise.macs, 2048 * 9);
  EXPECT_EQ(depthwise.flops, 2 * 2048 * 9 + 2048);
  EXPECT_EQ(depthwise.writes, 2048 * 8);
  // Transposed: every input element scatters into Cout/groups * kh * kw results.
  OpCost transposed = last_node_cost(
      "graph g(%x: f32[1,4,5,5], %w: f32[4,6,2,2]) {\n"
      "  %y = conv_transpose2d(%x, %w, stride=[2, 2])\n  return %y\n}\n");
  EXPECT_EQ(transposed.macs, 100 * 24);
}

TEST(GraphCost, NormalizationPoolsAndReductionsCountPerElement) {
  EXPECT_EQ(last_node_cost("graph g(%x: f32[4,10]) {\n  %y = softmax(%x, dim=1)\n"
                           "  return %y\n}\n")
                .flops,
            5 * 40);
  EXPECT_EQ(last_node_cost("graph g(%x: f32[4,10], %w: f32[10], %b: f32[10]) {\n"
                           "  %y = layer_norm(%x, %w, %b, normalized_shape=[10])\n"
                           "  return %y\n}\n")
                .flops,
            8 * 40);
  // 3x3 max pool, stride 2: 1x2x4x4 results, 9 comparisons each.
  EXPECT_EQ(last_node_cost("graph g(%x: f32[1,2,9,9]) {\n"
                           "  %y = max_pool2d(%x, kernel_size=[3, 3], stride=[2, 2])\n"
                           "  return %y\n}\n")
                .flops,
            32 * 9);
  EXPECT_EQ(
      last_node_cost("graph g(%x: f32[6,7]) {\n  %y = sum(%x, dims=[1])\n  return %y\n}\n").flops,
      42);
  // An elementwise op without a rule of its own: one FLOP per result, operands read whole
  // (a broadcast operand once).
  OpCost add =
      last_node_cost("graph g(%x: f32[6,7], %y: f32[7]) {\n  %z = add(%x, %y)\n  return %z\n}\n");
  EXPECT_EQ(add.flops, 42);
  EXPECT_EQ(add.reads, (std::vector<double>{168, 28}));
}

TEST(GraphCost, ViewsMoveNothingAndGathersReadOnlyTheirRows) {
  OpCost view =
      last_node_cost("graph g(%x: f32[6,7]) {\n  %y = permute(%x, dims=[1, 0])\n  return %y\n}\n");
  EXPECT_TRUE(view.view);
  EXPECT_EQ(view.bytes(), 0);
  EXPECT_EQ(view.flops, 0);
  // Four rows of 8 floats from a 1000-row table, and the four int64 indices.
  OpCost lookup = last_node_cost(
      "graph g(%t: f32[1000,8], %i: i64[4]) {\n  %y = embedding(%t, %i)\n  return %y\n}\n");
  EXPECT_EQ(lookup.reads, (std::vector<double>{128, 32}));
  EXPECT_EQ(lookup.flops, 0);
}

TEST(GraphCost, CompulsoryTrafficCountsEachInputOnceThroughViews) {
  // x is read through a reshape and again by the add: once. The table is read for 2 rows only.
  const Graph g = parse_graph(
      "graph g(%x: f32[4,6], %i: i64[2]) {\n"
      "  param %w: f32[6,3] = randn(seed=1)\n"
      "  param %t: f32[100,3] = randn(seed=2)\n"
      "  %r = reshape(%x, shape=[4, 6])\n"
      "  %h = matmul(%r, %w)\n"
      "  %e = embedding(%t, %i)\n"
      "  %s = add(%x, %x)\n"
      "  return %h, %e, %s\n}\n");
  const GraphCost c = graph_cost(g);
  EXPECT_EQ(c.min_bytes, 4 * (24 + 18 + 6) + 8 * 2 + 4 * (12 + 6 + 24));
  EXPECT_EQ(c.macs, 4 * 3 * 6);
  EXPECT_EQ(c.flops, 2 * 72 + 24);
  // Op by op: matmul reads x and w, writes h; embedding reads 2 rows and the indices; add reads x
  // twice.
  EXPECT_EQ(c.unfused_bytes, 4 * (24 + 18 + 12) + (4 * 6 + 16 + 4 * 6) + 4 * (24 + 24 + 24));
}

// Published counts: torchvision's model cards (ResNet-50 4.09 GFLOPS, MobileNetV2 0.30, both
// multiply-adds at 224x224) and parameter counts; BERT-base by hand for sequence 128: per layer
// four 768x768 projections and two 768x3072 FFN matmuls per token, and 12 heads of 128x128x64
// scores and context.
TEST(GraphCost, ModelsMatchTheirPublishedAndHandCounts) {
  auto cost_of = [](const std::string& name) {
    return graph_cost(models::build_model(models::find_model(name), {Variant::kFull, 1}));
  };
  const GraphCost resnet50 = cost_of("resnet50");
  EXPECT_NEAR(resnet50.macs / 4.09e9, 1.0, 0.02);
  // Weights (25,557,032 parameters and 53,120 running statistics), the image and the logits.
  EXPECT_NEAR(resnet50.min_bytes / (4.0 * (25557032 + 53120 + 3 * 224 * 224 + 1000)), 1.0, 0.02);
  // The rest of the FLOPs (batch norm, ReLU, adds, pools) are under 2% of the multiply-adds'.
  EXPECT_GT(resnet50.flops, 2 * resnet50.macs);
  EXPECT_LT(resnet50.flops, 1.02 * 2 * resnet50.macs);

  const GraphCost mobilenet = cost_of("mobilenet_v2");
  EXPECT_NEAR(mobilenet.macs / 0.30e9, 1.0, 0.02);
  EXPECT_NEAR(mobilenet.min_bytes / (4.0 * (3504872 + 34112 + 3 * 224 * 224 + 1000)), 1.0, 0.02);

  const double per_layer = 128.0 * (4 * 768 * 768 + 2 * 768 * 3072) + 2.0 * 12 * 128 * 128 * 64;
  const GraphCost bert = cost_of("bert_base");
  EXPECT_NEAR(bert.macs / (12 * per_layer), 1.0, 0.02);
  EXPECT_NEAR(bert.min_bytes / (4.0 * (85054464 + 2 * 128 * 768)), 1.0, 0.02);
}

}  // namespace
}  // namespace crucible
