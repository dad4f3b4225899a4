// Fusion never moves a stored result far back: a node joins a kernel only when few nodes run
// between that kernel and it (max_fusion_distance), unless its result is small. Checked on the
// groups fuse() makes and on the tensor storage a whole run holds at its peak, against eager's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "backend_pair.h"
#include "codegen/passes.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/core/block_cache.h"
#include "crucible/ir/text_format.h"

namespace crucible {
namespace {

// %x's exp and its row sums make the first kernel; `chain` tanh nodes over another shape follow
// (%c1 .. %cN, a matmul at the middle, so a value is stored there); then %r = x * x, which could
// run in the first kernel (its rows, its operand), and %t = b * b, 256 floats that only that
// kernel's per-row space takes. Each is a graph output, so what a far join stores lives from the
// first kernel on.
Graph far_sibling_graph(int chain) {
  std::string text =
      "graph far(%x: f32[256,1024], %y: f32[1024,256], %b: f32[256], %w: f32[256,256]) {\n"
      "  %u = exp(%x)\n  %su = sum(%u, dims=[1])\n  %c0 = tanh(%y)\n";
  for (int i = 1; i <= chain; ++i) {
    text += i == chain / 2 ? fmt::format("  %c{} = matmul(%c{}, %w)\n", i, i - 1)
                           : fmt::format("  %c{} = tanh(%c{})\n", i, i - 1);
  }
  text += fmt::format("  %r = mul(%x, %x)\n  %t = mul(%b, %b)\n  return %su, %c{}, %r, %t\n}}\n",
                      chain);
  return parse_graph(text);
}

int group_of(const Graph& g, const codegen::LoopProgram& lp, const std::string& name) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.value(g.nodes()[i].output).name == name) return lp.group_of[i];
  }
  ADD_FAILURE() << "no node %" << name;
  return -1;
}

codegen::LoopProgram fused(const Graph& g, size_t max_distance) {
  codegen::CodegenConfig config;
  config.max_fusion_distance = max_distance;
  codegen::LoopProgram lp = codegen::lower(g, config);
  codegen::fuse(g, lp, config);
  return lp;
}

TEST(CodegenFusionDistance, AFarNodeWithALargeResultStartsAKernelOfItsOwn) {
  const Graph far = far_sibling_graph(70);
  const codegen::LoopProgram lp = fused(far, 64);
  const int first = group_of(far, lp, "u");
  EXPECT_EQ(group_of(far, lp, "su"), first);
  EXPECT_NE(group_of(far, lp, "r"), first) << codegen::print_loop_program(far, lp);
  // 1 KiB: small enough to join from anywhere.
  EXPECT_EQ(group_of(far, lp, "t"), first) << codegen::print_loop_program(far, lp);

  // Allowed that far, %r joins the first kernel; a near %r joins it under the default.
  const codegen::LoopProgram wide = fused(far, 100);
  EXPECT_EQ(group_of(far, wide, "r"), group_of(far, wide, "u"));
  const Graph near = far_sibling_graph(20);
  const codegen::LoopProgram lp_near = fused(near, 64);
  EXPECT_EQ(group_of(near, lp_near, "r"), group_of(near, lp_near, "u"));
}

TEST(CodegenFusionDistance, TheOptionIsACountAndNamedWhenWrong) {
  EXPECT_EQ(codegen::CodegenConfig::parse({}).max_fusion_distance, 64u);
  EXPECT_EQ(codegen::CodegenConfig::parse({{"max_fusion_distance", "7"}}).max_fusion_distance, 7u);
  for (const std::string bad : {"0", "-3", "far", ""}) {
    try {
      codegen::CodegenConfig::parse({{"max_fusion_distance", bad}});
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("max_fusion_distance=" + bad), std::string::npos)
          << e.what();
    }
  }
}

class CodegenFusionMemory : public testing::BackendPair {};

// The run's peak of tensor storage: eager frees each result after its last reader, so it holds
// at most two of %c's values (2 MiB, the matmul's operand and result) and at the end %c70 and %r.
// With %r computed in the first kernel, codegen held %r through the matmul too: 3 MiB.
TEST_F(CodegenFusionMemory, AFarSiblingDoesNotRaiseThePeakAboveEagers) {
  const Graph g = far_sibling_graph(70);
  const auto in = make_inputs(g, 5);
  auto peak_of = [&](LoadedBackend& backend, const plugin::Options& options) {
    auto exe = backend.backend().compile(g, options);
    const size_t before = storage_bytes_in_use();
    storage_peak_reset();
    exe->run(in);
    return storage_peak_bytes() - before;
  };
  const size_t eager = peak_of(*eager_, {});
  const size_t codegen = peak_of(*codegen_, {});
  EXPECT_LE(codegen, eager) << "codegen " << (codegen >> 10) << " KiB, eager " << (eager >> 10)
                            << " KiB";
  plugin::Options far;
  far.config["max_fusion_distance"] = "1000";
  const size_t joined = peak_of(*codegen_, far);
  EXPECT_GE(joined, eager + (size_t{1} << 20)) << "the test no longer shows a far join's cost";
  ExpectSameAsEager(g, in);
}

}  // namespace
}  // namespace crucible
