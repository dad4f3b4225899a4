// Generated kernels inside channels-inner chains: a squeeze-excite block's spatial mean and gate
// and a global average pool keep the chain's layout (NHWC or nChw8c) and match eager; kernels
// that cannot (other reductions, NCHW or W-broadcast operands) keep their values NCHW.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_pair.h"
#include "chain_layouts.h"
#include "crucible/ir/text_format.h"

namespace crucible {
namespace {

using testing::ChainName;
using testing::ExpectLayouts;

class CodegenChainKernels : public testing::BackendPair {};

// Options for `chain`, with 3x3 convolutions on the direct kernel: `fastest` may time Winograd
// faster on a loaded machine (under a sanitizer, say), and its rounding, up to 7.5x eager's on
// 16-channel layers, is not what these tests are about.
plugin::Options ChainOptions(const std::string& chain) {
  plugin::Options o = testing::ChainOptions(chain);
  o.config["conv_algorithm"] = "direct";
  return o;
}

// EfficientNet's MBConv with its squeeze-excite (a 3x3 stem, as a 1x1 on the NCHW input would
// write NCHW; depthwise, mean, two 1x1s, gate, project), then a head and a global average pool. The
// gate is a sigmoid the second 1x1 absorbs in one block and a tanh the gate kernel recomputes per
// pixel in the other, multiplied from either side. 11x11 pixels: the pool's 4-way unrolled sum has
// a remainder.
Graph SqueezeExcite() {
  return parse_graph(R"(graph se(%x: f32[2,16,11,11]) {
  param %we: f32[32,16,3,3] = randn(seed=1, std=0.1)
  param %wd: f32[32,1,3,3] = randn(seed=2, std=0.4)
  param %w1: f32[8,32,1,1] = randn(seed=3, std=0.3)
  param %b1: f32[8] = randn(seed=4, std=0.1)
  param %w2: f32[32,8,1,1] = randn(seed=5, std=0.3)
  param %b2: f32[32] = randn(seed=6, std=0.1)
  param %wp: f32[32,32,1,1] = randn(seed=7, std=0.2)
  param %wq: f32[32,1,5,5] = randn(seed=8, std=0.2)
  param %w3: f32[8,32,1,1] = randn(seed=9, std=0.3)
  param %w4: f32[32,8,1,1] = randn(seed=10, std=0.3)
  param %wz: f32[24,32,1,1] = randn(seed=11, std=0.2)
  %e = conv2d(%x, %we, padding=[1,1])
  %ea = silu(%e)
  %d = conv2d(%ea, %wd, padding=[1,1], groups=32)
  %da = silu(%d)
  %m = mean(%da, dims=[2, 3], keepdim=true)
  %s1 = conv2d(%m, %w1, %b1)
  %s1a = relu(%s1)
  %s2 = conv2d(%s1a, %w2, %b2)
  %g = sigmoid(%s2)
  %y = mul(%da, %g)
  %p = conv2d(%y, %wp)
  %q = conv2d(%p, %wq, padding=[2,2], groups=32)
  %qa = relu(%q)
  %m2 = mean(%qa, dims=[-1, -2], keepdim=true)
  %t1 = conv2d(%m2, %w3)
  %t1a = relu(%t1)
  %t2 = conv2d(%t1a, %w4)
  %g2 = tanh(%t2)
  %y2 = mul(%g2, %qa)
  %z = conv2d(%y2, %wz)
  %za = relu(%z)
  %pool = mean(%za, dims=[2, 3])
  return %pool
}
)");
}

TEST_F(CodegenChainKernels, SqueezeExciteAndGlobalPoolRunInTheChain) {
  const Graph g = SqueezeExcite();
  const std::pair<const char*, const char*> steps[] = {
      {"\\(%x\\) -> %ea", "nchw -> C"},    {"\\(%ea\\) -> %da", "C -> C"},
      {"\\(%da\\) -> %m\\b", "C -> nchw"}, {"\\(%da, %g\\) -> %y\\b", "C -> C"},
      {"\\(%y\\) -> %p\\b", "C -> C"},     {"\\(%p\\) -> %qa", "C -> C"},
      {"\\(%qa\\) -> %m2", "C -> nchw"},   {"%qa\\) -> %y2", "C -> C"},
      {"\\(%y2\\) -> %za", "C -> C"},      {"\\(%za\\) -> %pool", "C -> nchw"},
  };
  std::vector<Tensor> in = make_inputs(g, 3);
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    SCOPED_TRACE(chain);
    const std::string sched = debug_artifact(g, "schedule.txt", ChainOptions(chain));
    ExpectLayouts(sched, chain, steps);
    // The squeeze path's [N,C,1,1] values need no layout of their own.
    EXPECT_EQ(count(sched, " layout "), 10) << sched;
    ExpectSameAsEager(g, in, ChainOptions(chain));
    // chain_kernels=off: the kernels read NCHW, so the depthwise convolutions and the stem write
    // it, and each 1x1 after a kernel reads NCHW so writes it: nothing chains.
    plugin::Options off = ChainOptions(chain);
    off.config["chain_kernels"] = "off";
    const std::string plain = debug_artifact(g, "schedule.txt", off);
    EXPECT_EQ(count(plain, " layout "), 0) << plain;
    EXPECT_EQ(count(plain, "cpp_fused_mean_0(%da) -> %m\n"), 1) << plain;
  }
  // A NaN pixel makes its channel's mean NaN, so its image's gate and everything after it.
  in[0].data<float>()[5] = NAN;
  for (const std::string chain : {"nhwc", "nchw8c"}) {
    SCOPED_TRACE(chain);
    ExpectSameAsEager(g, in, ChainOptions(chain));
    const auto got = codegen_->backend().compile(g, ChainOptions(chain))->run(in);
    EXPECT_TRUE(std::isnan(got[0].data<float>()[0])) << "image 0";
    EXPECT_FALSE(std::isnan(got[0].data<float>()[24])) << "image 1";
  }
}

// Under NHWC a pool over 12 channels (not a multiple of 8) sums all of them as one SIMD row; under
// nChw8c they cannot lie in blocks of 8, so the chain keeps them NCHW.
TEST_F(CodegenChainKernels, GlobalPoolOverChannelsOutsideBlocksOfEight) {
  const Graph g = parse_graph(R"(graph pool12(%x: f32[3,4,9,7]) {
  param %w0: f32[12,4,3,3] = randn(seed=1, std=0.3)
  param %w1: f32[12,12,3,3] = randn(seed=2, std=0.2)
  %a = conv2d(%x, %w0, padding=[1,1])
  %ar = relu(%a)
  %b = conv2d(%ar, %w1, padding=[1,1])
  %s = sum(%b, dims=[2, 3], keepdim=true)
  return %s
}
)");
  const std::pair<const char*, const char*> nhwc[] = {{"\\(%ar\\) -> %b", "C -> C"},
                                                      {"\\(%b\\) -> %s", "C -> nchw"}};
  ExpectLayouts(debug_artifact(g, "schedule.txt", ChainOptions("nhwc")), "nhwc", nhwc);
  EXPECT_EQ(count(debug_artifact(g, "schedule.txt", ChainOptions("nchw8c")), " layout "), 0);
  for (const std::string chain : {"nhwc", "nchw8c"}) ExpectSameAsEager(g, {}, ChainOptions(chain));
}

// Kernels the chain cannot take: a mean over W alone, a product with a graph input over the whole
// space (NCHW, not the chain's to choose), an add of a [W]-shaped row (it broadcasts along W, not
// the channels). The convolutions writing their operands keep those NCHW; results match eager.
TEST_F(CodegenChainKernels, KernelsOutsideTheChainKeepNchw) {
  for (const char* tail : {"  %r = mean(%b, dims=[3], keepdim=true)\n", "  %r = mul(%b, %x)\n",
                           "  param %row: f32[9] = randn(seed=3)\n  %r = add(%b, %row)\n"}) {
    SCOPED_TRACE(tail);
    const Graph g = parse_graph(std::string(R"(graph out(%x: f32[2,16,9,9]) {
  param %w0: f32[16,16,3,3] = randn(seed=1, std=0.1)
  param %w1: f32[16,16,3,3] = randn(seed=2, std=0.2)
  %a = conv2d(%x, %w0, padding=[1,1])
  %b = conv2d(%a, %w1, padding=[1,1])
)") + tail + "  return %r\n}\n");
    for (const std::string chain : {"nhwc", "nchw8c"}) {
      const std::string sched = debug_artifact(g, "schedule.txt", ChainOptions(chain));
      EXPECT_EQ(count(sched, " layout nchw -> " + ChainName(chain) + "\n"), 1) << sched;
      EXPECT_EQ(count(sched, " layout " + ChainName(chain) + " -> nchw\n"), 1) << sched;
      EXPECT_EQ(count(sched, " layout "), 2) << sched;
      ExpectSameAsEager(g, {}, ChainOptions(chain));
    }
  }
}

// A bug planted in a chain kernel (the pool's sum started at 1, a lane read off by one, the gate's
// product doubled) still makes the output wrong, so bisection and the minifier find it there.
TEST_F(CodegenChainKernels, PlantedBugsSurviveTheChainLayout) {
  const Graph g = SqueezeExcite();
  const std::vector<Tensor> in = make_inputs(g, 4);
  const auto want = eager_->backend().compile(g, {})->run(in);
  for (const char* bug : {"mean:bad_init", "mean:offbyone", "mul:times2"}) {
    for (const std::string chain : {"nhwc", "nchw8c"}) {
      SCOPED_TRACE(std::string(bug) + " " + chain);
      plugin::Options o = ChainOptions(chain);
      o.config["inject"] = bug;
      const auto got = codegen_->backend().compile(g, o)->run(in);
      double worst = 0;
      for (int64_t i = 0; i < want[0].numel(); ++i)
        worst = std::max(
            worst, std::abs(double(got[0].data<float>()[i]) - double(want[0].data<float>()[i])));
      EXPECT_GT(worst, 1e-3);
      // The planted kernel still runs in the chain.
      EXPECT_EQ(count(debug_artifact(g, "schedule.txt", o), " layout "), 10);
    }
  }
}

}  // namespace
}  // namespace crucible
