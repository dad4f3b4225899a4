// The parts of audited timing on their own: output digests, sample statistics, the noise verdict,
// the counters, and --seed reaching parameter recipes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "contention.h"
#include "crucible/ir/graph.h"
#include "crucible/ir/text_format.h"
#include "crucible/reports/records.h"
#include "output_digest.h"
#include "perf_counters.h"
#include "timing_pool.h"

namespace crucible {
namespace {

TEST(OutputDigest, ChangesWithAnyElementBitDtypeOrShape) {
  Tensor a = Tensor::from_doubles(DType::kF32, {4, 5}, std::vector<double>(20, 1.5));
  const uint64_t base = digest(a);
  EXPECT_EQ(digest(a.clone()), base);
  for (int64_t i = 0; i < 20; ++i) {
    Tensor b = a.clone();
    uint32_t bits;
    std::memcpy(&bits, b.data<float>() + i, 4);
    bits ^= 1;  // the last mantissa bit of one element
    std::memcpy(b.data<float>() + i, &bits, 4);
    EXPECT_NE(digest(b), base) << "element " << i;
  }
  EXPECT_NE(digest(a.reshape(std::vector<int64_t>{5, 4})), base);
  EXPECT_NE(digest(a.to(DType::kF64)), base);
  // Logical order: a transposed view digests as its contiguous copy does.
  Tensor t = Tensor::from_doubles(DType::kF32, {2, 3}, std::vector<double>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(digest(t.transpose(0, 1)), digest(t.transpose(0, 1).contiguous()));
  EXPECT_NE(digest(t.transpose(0, 1)), digest(t.reshape(std::vector<int64_t>{3, 2})));
  EXPECT_EQ(digest_all(std::vector<Tensor>{a, t}).size(), 2u);
}

TEST(SampleStats, PercentilesAndCoefficientOfVariation) {
  std::vector<double> v;
  for (int i = 1; i <= 10; ++i) v.push_back(i);
  const auto s = reports::summarize(v);
  EXPECT_DOUBLE_EQ(s.p10, 1.0);
  EXPECT_DOUBLE_EQ(s.p90, 9.0);
  EXPECT_NEAR(s.cv, s.stdev / 5.5, 1e-12);
  EXPECT_DOUBLE_EQ(reports::summarize({4.0}).cv, 0.0);
  EXPECT_TRUE(std::isnan(reports::summarize({}).p90));
}

TEST(NoiseReason, EachFigureHasItsThresholdAndShortWindowsIgnoreProcStat) {
  reports::Contention quiet;
  quiet.canary_before_ms = quiet.canary_after_ms = 37;
  EXPECT_EQ(noise_reason(quiet, 1.0), "");
  auto c = quiet;
  c.run_delay = 0.3;
  EXPECT_NE(noise_reason(c, 1.0).find("run delay 30%"), std::string::npos);
  c = quiet;
  c.other_cpu = 0.5;
  EXPECT_NE(noise_reason(c, 1.0).find("other processes"), std::string::npos);
  EXPECT_EQ(noise_reason(c, 0.1), "");  // 10 ms ticks over 0.1 s say nothing
  c = quiet;
  c.steal = 0.2;
  EXPECT_NE(noise_reason(c, 1.0).find("steal"), std::string::npos);
  c = quiet;
  c.canary_after_ms = 60;
  EXPECT_NE(noise_reason(c, 1.0).find("canary"), std::string::npos);
  // Memory bandwidth that moved 20% between before and after: a memory-bound time moved with it,
  // one whose values fit in the cores' private caches did not.
  NoiseThresholds t;
  t.memory_bound_mb = 4;
  c = quiet;
  c.triad_before_gbs = 20;
  c.triad_after_gbs = 16;
  c.working_set_mb = 5;
  EXPECT_NE(noise_reason(c, 1.0, t).find("memory bandwidth 20.0 GB/s before, 16.0 GB/s after"),
            std::string::npos)
      << noise_reason(c, 1.0, t);
  c.working_set_mb = 3;
  EXPECT_EQ(noise_reason(c, 1.0, t), "");
  c.working_set_mb = 5;
  c.triad_after_gbs = 19;  // 5%: quiet
  EXPECT_EQ(noise_reason(c, 1.0, t), "");
  EXPECT_GT(private_cache_mb(), 0);
}

// Timings from several processes pool their samples; a failed audit or noise in any process wins.
TEST(TimingPool, AppendsSamplesAndKeepsFailuresAndNoise) {
  auto timing = [](std::vector<double> samples, bool noisy, double run_delay) {
    reports::ResultRecord r = reports::make_result("s", "m", "b", "performance", 1);
    r.status = reports::Status::kPass;
    r.samples_ms = samples;
    r.instructions = samples;
    r.noisy = noisy;
    r.noise_reason = noisy ? "run delay" : "";
    r.contention = reports::Contention{};
    r.contention->run_delay = run_delay;
    return r;
  };
  reports::ResultRecord pool = timing({1, 2}, false, 0.01);
  pool_timing(pool, timing({3}, true, 0.5));
  pool_timing(pool, timing({4, 5}, false, 0.02));
  EXPECT_EQ(pool.samples_ms, (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.instructions.size(), 5u);
  EXPECT_EQ(pool.status, reports::Status::kPass);
  EXPECT_TRUE(pool.noisy);
  EXPECT_EQ(pool.noise_reason, "run delay");
  EXPECT_DOUBLE_EQ(pool.contention->run_delay, 0.5);  // the noisy process's figures

  reports::ResultRecord cheat = timing({6}, false, 0);
  cheat.status = reports::Status::kFailAccuracyInPerf;
  cheat.error = "call 3's outputs differ";
  pool_timing(pool, cheat);
  pool_timing(pool, timing({7}, false, 0));
  EXPECT_EQ(pool.status, reports::Status::kFailAccuracyInPerf);
  EXPECT_EQ(pool.error, "call 3's outputs differ");
}

// The memory canary measures a bandwidth: positive, finite, and far below anything absurd.
TEST(MemoryCanary, MeasuresATriadBandwidth) {
  const double gbs = memory_canary_gbs();
  EXPECT_GT(gbs, 0.1);
  EXPECT_LT(gbs, 10000);
}

TEST(PerfCounters, CountPageFaultsOrSayWhyNot) {
  PerfCounters counters;
  const auto before = counters.read();
  std::vector<char> touched(64 << 20);
  for (size_t i = 0; i < touched.size(); i += 4096) touched[i] = 1;
  const auto after = counters.read();
  if (std::isnan(before.page_faults)) {
    EXPECT_NE(counters.unavailable().find("page_faults"), std::string::npos);
  } else {
    EXPECT_GE(after.page_faults - before.page_faults, 1000);  // 16384 pages, some maybe huge
  }
  // A refused counter is NaN and named, never a silent zero.
  if (std::isnan(before.instructions)) {
    EXPECT_NE(counters.unavailable().find("instructions"), std::string::npos);
  } else {
    EXPECT_GT(after.instructions, before.instructions);
  }
}

TEST(ReseedParams, SeedChangesRandomParametersOnlyAndZeroKeepsThem) {
  const std::string text =
      "graph g(%x: f32[4]) {\n"
      "  param %r: f32[4] = randn(seed=3)\n"
      "  param %u: f32[4] = uniform(low=0, high=1)\n"
      "  param %k: f32[4] = ones()\n"
      "  %a = add(%x, %r)\n  %b = add(%a, %u)\n  %c = add(%b, %k)\n  return %c\n}\n";
  auto data = [&](uint64_t seed) {
    Graph g = parse_graph(text);
    reseed_params(g, seed);
    std::vector<std::vector<double>> out;
    for (ValueId id : g.params()) out.push_back(materialize_param(g, id).to_doubles());
    return out;
  };
  const auto d0 = data(0), d7 = data(7), d7b = data(7), d8 = data(8);
  Graph plain = parse_graph(text);
  EXPECT_EQ(d0[0], materialize_param(plain, plain.params()[0]).to_doubles());
  EXPECT_EQ(d7, d7b);  // deterministic
  EXPECT_NE(d7[0], d0[0]);
  EXPECT_NE(d7[1], d0[1]);
  EXPECT_NE(d7[0], d8[0]);
  EXPECT_EQ(d7[2], d0[2]);  // ones() has nothing to seed
}

}  // namespace
}  // namespace crucible
