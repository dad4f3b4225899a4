// The remembered-results verdict on its own: a machine that slowed some calls at random sets off
// the screen but is not confirmed; fresh calls that are all slow are, however the noise falls.
#include "fresh_verdict.h"

#include <gtest/gtest.h>

#include <random>

namespace crucible {
namespace {

// n draws of `ms`, each doubled with probability `p_slow` (a core taken by another process).
std::vector<double> bimodal(std::mt19937_64& rng, int n, double ms, double p_slow) {
  std::bernoulli_distribution slow(p_slow);
  std::normal_distribution<double> jitter(1.0, 0.01);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(ms * jitter(rng) * (slow(rng) ? 2.0 : 1.0));
  return out;
}

TEST(FreshVerdict, ThreeUnluckyFreshCallsAreASuspicionNotAVerdict) {
  // Issue 29's false alarm: eager's add_add_mul_add on a loaded machine, its 3 fresh calls all
  // slowed 1.9x while its fastest samples were not.
  const std::vector<double> fresh = {24.5, 24.9, 25.3};
  const std::vector<double> samples = {12.9, 13.1, 24.5, 24.9, 25.3, 13.0};
  FreshVerdict v = judge_fresh_calls(fresh, samples, {12.9, 13.1, 13.0});
  EXPECT_TRUE(v.suspect());
  // The confirmation rounds: fresh and plain samples slowed alike.
  std::mt19937_64 rng(7);
  std::vector<double> more_fresh = fresh, more_plain = {12.9, 13.1, 13.0}, all = samples;
  for (double x : bimodal(rng, 8, 13.0, 0.5)) more_fresh.push_back(x), all.push_back(x);
  for (double x : bimodal(rng, 8, 13.0, 0.5)) more_plain.push_back(x), all.push_back(x);
  v = judge_fresh_calls(more_fresh, all, more_plain);
  EXPECT_FALSE(v.confirmed()) << v.fresh_median << " vs " << v.plain_median << " p " << v.p_value;
}

TEST(FreshVerdict, RandomSlowdownsAreNeverConfirmedOverManyRuns) {
  // 2,000 honest runs on a machine that doubles half the calls: 3 fresh calls in the first 10
  // rounds, then the 16 confirmation rounds, half fresh.
  std::mt19937_64 rng(11);
  int suspected = 0, confirmed = 0;
  for (int run = 0; run < 2000; ++run) {
    std::vector<double> fresh = bimodal(rng, 3, 1.0, 0.5), plain = bimodal(rng, 7, 1.0, 0.5);
    std::vector<double> all = fresh;
    all.insert(all.end(), plain.begin(), plain.end());
    if (!judge_fresh_calls(fresh, all, plain).suspect()) continue;
    ++suspected;
    for (double x : bimodal(rng, 8, 1.0, 0.5)) fresh.push_back(x), all.push_back(x);
    for (double x : bimodal(rng, 8, 1.0, 0.5)) plain.push_back(x), all.push_back(x);
    confirmed += judge_fresh_calls(fresh, all, plain).confirmed() ? 1 : 0;
  }
  EXPECT_GT(suspected, 50);  // the screen alone would have accused these
  EXPECT_LE(confirmed, 1);   // p < 0.001 in the direction judged, on the suspects only
}

TEST(FreshVerdict, RememberedResultsAreConfirmedEvenOnALoadedMachine) {
  // Computed calls take 1 ms, remembered ones 0.1 ms; the machine doubles a third of all calls.
  std::mt19937_64 rng(5);
  for (int run = 0; run < 200; ++run) {
    std::vector<double> fresh = bimodal(rng, 3 + 8, 1.0, 0.33);
    std::vector<double> plain = bimodal(rng, 7 + 8, 0.1, 0.33);
    std::vector<double> all = fresh;
    all.insert(all.end(), plain.begin(), plain.end());
    const FreshVerdict v = judge_fresh_calls(fresh, all, plain);
    ASSERT_TRUE(v.confirmed()) << run << ": " << v.fresh_median << " vs " << v.plain_median << " p "
                               << v.p_value;
  }
}

TEST(FreshVerdict, HonestFreshCallsABitSlowerAreNotSuspect) {
  // Branch predictors that learned the repeated inputs: 1.4x on a 1 us graph, 1.2x on 50 us.
  EXPECT_FALSE(judge_fresh_calls({0.0014, 0.0015}, {0.001, 0.001, 0.001}, {0.001}).suspect());
  EXPECT_FALSE(judge_fresh_calls({0.060, 0.061}, {0.05, 0.05, 0.05}, {0.05}).suspect());
  // Without fresh calls or samples there is nothing to judge.
  EXPECT_FALSE(judge_fresh_calls({}, {1.0}, {1.0}).confirmed());
  EXPECT_FALSE(judge_fresh_calls({5.0}, {1.0}, {1.0}).confirmed());  // one fresh call: too few
}

}  // namespace
}  // namespace crucible
