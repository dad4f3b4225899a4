// Every timed result beside its physical limit, end to end: the worker measures its FMA peak and
// STREAM triad, each performance result stores the graph's FLOPs and compulsory bytes, and each
// kernel's FLOPs add up to the graph's, in the table, the CSV and `crucible kernels`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "cli_util.h"
#include "crucible/ir/graph_cost.h"
#include "crucible/ir/text_format.h"
#include "crucible/reports/store.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::run_crucible;

// Two GEMMs around a tanh, and a softmax: a packed GEMM with an epilogue, a fused kernel and an
// extern call in codegen's schedule.
constexpr const char* kGraph =
    "graph dense(%x: f32[64,256]) {\n"
    "  param %w: f32[256,256] = randn(seed=3, std=0.06)\n"
    "  param %b: f32[256] = randn(seed=4, std=0.1)\n"
    "  %h = linear(%x, %w, %b)\n  %t = tanh(%h)\n  %y = matmul(%t, %w)\n"
    "  %s = softmax(%y, dim=1)\n  return %s\n}\n";

class Roofline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_dir("crucible_roofline");
    std::ofstream(dir_ / "dense.graph") << kGraph;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Roofline, EveryTimedResultAndKernelStandsBesideItsBound) {
  auto r = run_crucible("run --graph " + (dir_ / "dense.graph").string() +
                        " --backends eager,codegen --mode performance --repeat 3 --db " +
                        (dir_ / "r.db").string() + " --output-dir " + (dir_ / "out").string());
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  // The table's column, and the ceilings it was measured against under the table.
  EXPECT_NE(r.out.find(" roofline "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("roofline: against the FMA peak ("), std::string::npos) << r.out;

  const GraphCost cost = graph_cost(parse_graph(kGraph));
  auto store = reports::Store::open(dir_ / "r.db");
  int timed = 0;
  for (const auto& row : store->results(store->runs().at(0).id)) {
    if (row.mode != "performance") continue;
    SCOPED_TRACE(row.backend);
    ++timed;
    ASSERT_TRUE(row.roofline.has_value());
    EXPECT_DOUBLE_EQ(row.roofline->flops, cost.flops);
    EXPECT_DOUBLE_EQ(row.roofline->min_bytes, cost.min_bytes);
    EXPECT_GT(row.roofline->peak_gflops, 0);
    EXPECT_GT(row.roofline->triad_gbs, 0);
    const auto figures = reports::roofline_figures(*row.roofline, row.stats.median);
    ASSERT_TRUE(figures.has_value());
    EXPECT_GT(figures->fraction, 0);
    EXPECT_FALSE(figures->memory_bound);  // 2 x 4 MFLOP on 0.5 MB of weights

    // The kernels' FLOPs per call add up to the graph's: the eager one op by op, codegen's over
    // its fused and packed steps (no op of this graph is decomposed).
    const auto profiled = store->latest_profiled_result("dense", row.backend);
    ASSERT_TRUE(profiled.has_value());
    double flops = 0;
    for (const auto& k : store->kernels(*profiled)) {
      if (k.name.rfind("view::", 0) == 0) continue;
      ASSERT_TRUE(k.flops.has_value()) << k.name;
      ASSERT_TRUE(k.bytes.has_value()) << k.name;
      EXPECT_GT(*k.bytes, 0) << k.name;
      flops += *k.flops;
    }
    EXPECT_NEAR(flops, cost.flops, 1e-6 * cost.flops);
  }
  EXPECT_EQ(timed, 2);
  // The cache ceiling beside them: L2's triad bandwidth and what the threads' L2 caches hold.
  auto q = run_crucible(
      "query \"SELECT count(*) FROM results WHERE mode = 'performance' AND cache_gbs > 0 AND"
      " cache_bytes > 0\" --format csv --db " +
      (dir_ / "r.db").string());
  ASSERT_EQ(q.status, 0) << q.err;
  if (::sysconf(_SC_LEVEL2_CACHE_SIZE) > 0) {
    EXPECT_NE(q.out.find("\n2\n"), std::string::npos) << q.out;
  }

  // The CSV carries the figures; `crucible kernels` sets each kernel beside the run's ceilings.
  const std::string csv = testing::read_all(dir_ / "out" / "codegen_performance.csv");
  EXPECT_NE(csv.find(",roofline_fraction,bound\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",compute\n"), std::string::npos) << csv;
  auto k = run_crucible("kernels --model dense --backend eager --format csv --db " +
                        (dir_ / "r.db").string());
  ASSERT_EQ(k.status, 0) << k.err;
  EXPECT_NE(k.out.find("eager::linear,"), std::string::npos) << k.out;
  EXPECT_EQ(k.out.find(",,,,\n"), std::string::npos) << k.out;  // no kernel without figures
}

}  // namespace
}  // namespace crucible

namespace crucible {
namespace {

// A median the machine cannot reach is named with its reason; one it can, even with a fast
// algorithm (Winograd's 4x fewer multiplies) or from a cache faster than the one measured, is not.
TEST(BeyondTheMachine, FlopsOverThePeakOrBytesOverTheirLevelAreImpossible) {
  reports::Roofline r;
  r.flops = 2e9;            // 2 GFLOP a call
  r.min_bytes = 1e6;        // 1 MB a call
  r.peak_gflops = 200;      // a call takes at least 10 ms at the peak
  r.triad_gbs = 40;         // DRAM
  r.cache_gbs = 150;        // L2 of the timed threads
  r.cache_bytes = 2 << 20;  // the bytes fit there
  EXPECT_EQ(reports::beyond_the_machine(r, 10.0), "");
  EXPECT_EQ(reports::beyond_the_machine(r, 3.0), "");  // 3.3x: Winograd at 83% of the peak
  const std::string fast = reports::beyond_the_machine(r, 1.0);  // 10x the peak
  EXPECT_NE(fast.find("faster than the machine computes: 2000.0 GFLOP/s"), std::string::npos)
      << fast;
  EXPECT_NE(fast.find("10.0x the FMA peak of 200.0 GFLOP/s"), std::string::npos) << fast;
  r.flops = 0;                                           // a data-movement graph: bytes alone
  EXPECT_EQ(reports::beyond_the_machine(r, 0.002), "");  // 500 GB/s: 3.3x the L2 triad
  EXPECT_NE(reports::beyond_the_machine(r, 0.001).find("the L2 triad of 150.0 GB/s"),
            std::string::npos);
  r.min_bytes = 64e6;  // does not fit the L2: DRAM's triad is the level
  EXPECT_EQ(reports::beyond_the_machine(r, 1.0), "");  // 64 GB/s
  EXPECT_NE(reports::beyond_the_machine(r, 0.3).find("the DRAM triad of 40.0 GB/s"),
            std::string::npos);
  EXPECT_EQ(reports::beyond_the_machine(r, 0.0), "");  // no median, no verdict
  EXPECT_EQ(reports::beyond_the_machine(reports::Roofline{}, 1.0), "");
}

}  // namespace
}  // namespace crucible
