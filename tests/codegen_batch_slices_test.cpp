// Batch slices: runs of packed convolutions whose activations outgrow the slice budget run a few
// images at a time (depth first). The plan is in schedule.txt; results, kept intermediates and
// values read after the run match eager; each image stays its own (a NaN does not cross slices).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_pair.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/ir/text_format.h"

namespace crucible {
namespace {

class CodegenBatchSlices : public testing::BackendPair {};

// Two MobileNetV2 inverted-residual blocks at batch 5: 1x1 expand + bn + ReLU6, depthwise 3x3 +
// ReLU6, 1x1 project + the block's input; the second block's depthwise output is also read by a
// mean after the run. With a 1 MiB budget an image's expand moves 320 KiB (3 images: more than
// half the batch), its depthwise 512 KiB (2) and its projection 384 KiB (2). The first block runs
// in slices of 2, 2 and 1 images, its expand heading it and the next expand (reading its output)
// ending it; the second block's depthwise and projection are the next run.
Graph TwoBlocks() {
  return parse_graph(R"(graph blocks(%x: f32[5,16,32,32]) {
  param %we: f32[64,16,1,1] = randn(seed=1, std=0.25)
  param %g: f32[64] = uniform(seed=2, low=0.5, high=1.5)
  param %b: f32[64] = randn(seed=3, std=0.1)
  param %m: f32[64] = randn(seed=4, std=0.1)
  param %v: f32[64] = uniform(seed=5, low=0.5, high=1.5)
  param %wd: f32[64,1,3,3] = randn(seed=6, std=0.3)
  param %wp: f32[16,64,1,1] = randn(seed=7, std=0.12)
  param %we2: f32[64,16,1,1] = randn(seed=8, std=0.25)
  param %wd2: f32[64,1,3,3] = randn(seed=9, std=0.3)
  param %wp2: f32[16,64,1,1] = randn(seed=10, std=0.12)
  %e = conv2d(%x, %we)
  %eb = batch_norm(%e, %g, %b, %m, %v)
  %ea = clamp(%eb, min=0.0, max=6.0)
  %d = conv2d(%ea, %wd, padding=[1,1], groups=64)
  %da = clamp(%d, min=0.0, max=6.0)
  %p = conv2d(%da, %wp)
  %y = add(%p, %x)
  %e2 = conv2d(%y, %we2)
  %e2a = clamp(%e2, min=0.0, max=6.0)
  %d2 = conv2d(%e2a, %wd2, padding=[1,1], groups=64)
  %d2a = relu(%d2)
  %p2 = conv2d(%d2a, %wp2)
  %y2 = add(%p2, %y)
  %s = mean(%d2a, dims=[2, 3])
  return %y2, %s
}
)");
}

plugin::Options Budget(const std::string& mb) {
  plugin::Options o;
  o.config["slice_budget_mb"] = mb;
  o.config["conv_algorithm"] = "direct";
  return o;
}

TEST_F(CodegenBatchSlices, BlocksRunTwoImagesAtATimeAndMatchEager) {
  const Graph g = TwoBlocks();
  const std::string sched = debug_artifact(g, "schedule.txt", Budget("1"));
  EXPECT_NE(sched.find("# batch slices\nsteps 0-3: 2 of 5 images at a time"), std::string::npos)
      << sched;
  EXPECT_NE(sched.find("\nsteps 4-5: 2 of 5 images at a time"), std::string::npos) << sched;
  std::vector<Tensor> in = make_inputs(g, 3);
  ExpectSameAsEager(g, in, Budget("1"));
  // The default budget holds a whole batch of these small blocks: nothing is sliced.
  plugin::Options whole = Budget("16");
  EXPECT_NE(debug_artifact(g, "schedule.txt", whole).find("# batch slices\nnone"),
            std::string::npos);
  plugin::Options off = Budget("1");
  off.config["batch_slices"] = "off";
  EXPECT_NE(debug_artifact(g, "schedule.txt", off).find("# batch slices\nnone"), std::string::npos);
  // Sliced or not, the same convolutions on the same images.
  const auto sliced = codegen_->backend().compile(g, Budget("1"))->run(in);
  const auto plain = codegen_->backend().compile(g, off)->run(in);
  ExpectTensorsMatch(sliced, plain, {"y2", "s"});

  // A NaN in image 3 (the second slice, beside image 2) stays in image 3.
  in[0].data<float>()[3 * 16 * 32 * 32 + 100] = NAN;
  const auto got = codegen_->backend().compile(g, Budget("1"))->run(in);
  for (int64_t image = 0; image < 5; ++image) {
    const float* y = got[0].data<float>() + image * 16 * 32 * 32;
    bool any_nan = false;
    for (int64_t k = 0; k < 16 * 32 * 32; ++k) any_nan |= std::isnan(y[k]);
    EXPECT_EQ(any_nan, image == 3) << "image " << image;
  }
}

// Values made inside a slice are handed back whole when asked for: the expand's and depthwise's
// results of both blocks, and the block output the second block reads as its residual.
TEST_F(CodegenBatchSlices, IntermediatesInsideASliceAreWhole) {
  const Graph g = TwoBlocks();
  std::vector<ValueId> ids;
  for (const char* name : {"ea", "da", "y", "e2a", "d2a", "y2"}) ids.push_back(*g.find_value(name));
  const std::vector<Tensor> in = make_inputs(g, 4);
  auto ref = eager_->backend().compile(g, {})->intermediates(in, ids);
  auto got = codegen_->backend().compile(g, Budget("1"))->intermediates(in, ids);
  ExpectTensorsMatch(got, ref, {"ea", "da", "y", "e2a", "d2a", "y2"});
}

// ResNet's dense 3x3s do 144 FLOPs per activation byte: a run of them is compute-bound and stays
// whole even where each image's activations outgrow the budget (slicing resnet18 cost 14%). A
// depthwise between them (2.25 FLOPs a byte) makes the run worth slicing.
TEST_F(CodegenBatchSlices, ComputeBoundRunsStayWhole) {
  auto chain = [](const std::string& middle) {
    return parse_graph(R"(graph dense(%x: f32[5,64,32,32]) {
  param %w1: f32[64,64,3,3] = randn(seed=1, std=0.05)
  param %w2: f32[64,64,3,3] = randn(seed=2, std=0.05)
  param %wd: f32[64,1,3,3] = randn(seed=3, std=0.3)
  param %w3: f32[64,64,3,3] = randn(seed=4, std=0.05)
  %a = conv2d(%x, %w1, padding=[1,1])
  %ar = relu(%a)
)" + middle + R"(  %b = conv2d(%mid, %w2, padding=[1,1])
  %br = relu(%b)
  return %br
}
)");
  };
  const Graph dense = chain("  %mid = conv2d(%ar, %w3, padding=[1,1])\n");
  const std::string whole = debug_artifact(dense, "schedule.txt", Budget("1"));
  EXPECT_NE(whole.find("step   2 extern::packed_conv2d_relu(%mid) -> %br"), std::string::npos)
      << whole;  // three chained convolutions, each with 2 images a slice
  EXPECT_NE(whole.find("# batch slices\nnone"), std::string::npos) << whole;
  const Graph mixed = chain("  %mid = conv2d(%ar, %wd, padding=[1,1], groups=64)\n");
  const std::string sched = debug_artifact(mixed, "schedule.txt", Budget("1"));
  EXPECT_NE(sched.find("# batch slices\nsteps 0-2: 2 of 5 images at a time"), std::string::npos)
      << sched;
  ExpectSameAsEager(mixed, {}, Budget("1"));
}

TEST(CodegenBatchSlicesConfig, BadValuesAreOneError) {
  EXPECT_TRUE(codegen::CodegenConfig::parse({}).batch_slices);
  EXPECT_EQ(codegen::CodegenConfig::parse({}).slice_budget_mb, 16u);
  EXPECT_EQ(codegen::CodegenConfig::parse({{"slice_budget_mb", "4"}}).slice_budget_mb, 4u);
  EXPECT_FALSE(codegen::CodegenConfig::parse({{"batch_slices", "off"}}).batch_slices);
  for (const auto& [k, v] : {std::pair{"slice_budget_mb", "0"},
                             {"slice_budget_mb", "-1"},
                             {"slice_budget_mb", "1.5"},
                             {"batch_slices", "sometimes"}}) {
    try {
      codegen::CodegenConfig::parse({{k, v}});
      ADD_FAILURE() << k << "=" << v << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(k) + "=" + v), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace crucible
