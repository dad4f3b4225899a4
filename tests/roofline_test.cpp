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
  // The cache ceilings beside them: each level's triad bandwidth and what it holds for the
  // threads, L1 faster than L2.
  auto q = run_crucible(
      "query \"SELECT count(*) FROM results WHERE mode = 'performance' AND l2_gbs > 0 AND"
      " l2_bytes > 0 AND l1_gbs > l2_gbs AND l1_bytes < l2_bytes\" --format csv --db " +
      (dir_ / "r.db").string());
  ASSERT_EQ(q.status, 0) << q.err;
  if (::sysconf(_SC_LEVEL2_CACHE_SIZE) > 0) {
    EXPECT_NE(q.out.find("\n2\n"), std::string::npos) << q.out;
  }

  // The CSV carries the figures; `crucible kernels` sets each kernel beside the run's ceilings.
  const std::string csv = testing::read_all(dir_ / "out" / "codegen_performance.csv");
  EXPECT_NE(csv.find(",roofline_fraction,bound,memory_level,memory_level_gbs,samples_per_s\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",compute,"), std::string::npos) << csv;
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
  r.flops = 2e9;           // 2 GFLOP a call
  r.min_bytes = 1e6;       // 1 MB a call
  r.peak_gflops = 200;     // a call takes at least 10 ms at the peak
  r.triad_gbs = 40;        // DRAM
  r.l1 = {400, 96e3};      // L1 of the timed threads
  r.l2 = {150, 2 << 20};   // their L2: the bytes fit there
  r.l3 = {100, 32 << 20};  // the L3 they share
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
  r.min_bytes = 64e3;                                     // fits the L1: its triad is the level
  EXPECT_EQ(reports::beyond_the_machine(r, 0.0002), "");  // 320 GB/s: 0.8x the L1 triad
  EXPECT_NE(reports::beyond_the_machine(r, 0.00002).find("the L1 triad of 400.0 GB/s"),
            std::string::npos);
  r.min_bytes = 16e6;                                   // over the L2, within the L3
  EXPECT_EQ(reports::beyond_the_machine(r, 0.05), "");  // 320 GB/s: 3.2x the L3 triad
  EXPECT_NE(reports::beyond_the_machine(r, 0.03).find("the L3 triad of 100.0 GB/s"),
            std::string::npos);
  r.min_bytes = 64e6;                                  // fits no cache: DRAM's triad is the level
  EXPECT_EQ(reports::beyond_the_machine(r, 1.0), "");  // 64 GB/s
  EXPECT_NE(reports::beyond_the_machine(r, 0.3).find("the DRAM triad of 40.0 GB/s"),
            std::string::npos);
  EXPECT_EQ(reports::beyond_the_machine(r, 0.0), "");  // no median, no verdict
  EXPECT_EQ(reports::beyond_the_machine(reports::Roofline{}, 1.0), "");
}

// A whole graph's memory bound comes from the level its compulsory bytes fit: 1 MB in L2 caches
// of 150 GB/s take at least 6.7 us, not the 25 us DRAM's 40 GB/s would say, so a median of 10 us
// is 67% of the bound, not 250%; bytes past every cache fall back to DRAM.
TEST(RooflineFigures, TheMemoryBoundIsTheLevelTheBytesFit) {
  reports::Roofline r;
  r.min_bytes = 1e6;
  r.peak_gflops = 200;
  r.triad_gbs = 40;
  r.l1 = {400, 96e3};
  r.l2 = {150, 2e6};
  r.l3 = {100, 32e6};
  auto f = reports::roofline_figures(r, 0.01);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->memory_bound);
  EXPECT_STREQ(f->level.name, "L2");
  EXPECT_NEAR(f->fraction, 1e6 / 150e9 / 1e-5, 1e-9);
  r.min_bytes = 50e3;
  EXPECT_STREQ(reports::roofline_figures(r, 0.01)->level.name, "L1");
  r.min_bytes = 8e6;
  EXPECT_STREQ(reports::roofline_figures(r, 0.01)->level.name, "L3");
  r.min_bytes = 33e6;
  f = reports::roofline_figures(r, 1.0);
  EXPECT_STREQ(f->level.name, "DRAM");
  EXPECT_NEAR(f->fraction, 33e6 / 40e9 / 1e-3, 1e-9);
  // A level measured slower than a larger one (on a busy moment) is held to the larger one's.
  r.l2 = {90, 2e6};
  r.min_bytes = 1e6;
  f = reports::roofline_figures(r, 1.0);
  EXPECT_STREQ(f->level.name, "L2");
  EXPECT_DOUBLE_EQ(f->level.gbs, 100);
  r.triad_gbs = 120;
  EXPECT_DOUBLE_EQ(reports::roofline_figures(r, 1.0)->level.gbs, 120);
  r.triad_gbs = 40;
  r.l2 = {150, 2e6};
  // A level not measured (its size unknown) is passed over, not taken as holding everything.
  r.l3 = {100, 0};
  r.min_bytes = 8e6;
  EXPECT_STREQ(reports::roofline_figures(r, 1.0)->level.name, "DRAM");
  r.l2 = {0, 2e6};
  r.min_bytes = 1e6;
  EXPECT_STREQ(reports::roofline_figures(r, 1.0)->level.name, "DRAM");
}

}  // namespace
}  // namespace crucible
