// Ties (comparison_ties.h) and the reference moved by them (tie_verdict.h): a mask on a value
// that is zero in exact arithmetic has ties, a structural zero has none, deciding a tie the other
// way moves the fp64 output by exactly that element's share, and only the ties that explain a
// backend's outputs move the reference.
#include "comparison_ties.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "cli_util.h"
#include "crucible/ir/text_format.h"
#include "crucible/ir/transforms.h"
#include "crucible/ops/interpreter.h"
#include "input_sets.h"
#include "output_sample.h"
#include "tensor_file.h"
#include "tie_verdict.h"

namespace crucible {
namespace {

constexpr int64_t kN = 4096;

// %a is (x + y) + z - (x + (y + z)): zero in exact arithmetic, a rounding error in f32 and in
// fp64; `structural` makes it x - x, zero in both.
Graph masked_sum(bool structural) {
  const std::string a = structural ? "  %a = sub(%x, %x)\n"
                                   : "  %xy = add(%x, %y)\n"
                                     "  %l = add(%xy, %z)\n"
                                     "  %yz = add(%y, %z)\n"
                                     "  %r = add(%x, %yz)\n"
                                     "  %a = sub(%l, %r)\n";
  return parse_graph("graph masked(%x: f32[4096], %y: f32[4096], %z: f32[4096]) {\n" + a +
                     "  %zero = sub(%x, %x)\n"
                     "  %m = ge(%a, %zero)\n"
                     "  %o = where(%m, %x, %zero)\n"
                     "  %s = sum(%o, dims=[0])\n"
                     "  return %s, %o\n"
                     "}\n");
}

std::vector<Tensor> normal_inputs() {
  std::mt19937 rng(7);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<Tensor> out;
  for (int k = 0; k < 3; ++k) {
    std::vector<double> v(kN);
    for (double& x : v) x = d(rng) * std::pow(10.0, k);
    out.push_back(Tensor::from_doubles(DType::kF32, {kN}, v));
  }
  return out;
}

int node_of(const Graph& g, const std::string& name) { return g.value(*g.find_value(name)).node; }

TEST(ComparisonTies, AMaskOnARoundingErrorHasTiesEachMovingItsElement) {
  const Graph g = masked_sum(false);
  const std::vector<Tensor> inputs = normal_inputs();
  size_t total = 0;
  const std::vector<Tie> ties = find_ties(g, inputs, kMaxTies, total);
  ASSERT_GT(total, 0u);
  ASSERT_EQ(ties.size(), std::min(total, kMaxTies));
  const std::vector<Tensor> fp64 = Interpreter(widen_to_f64(g)).run(widen_inputs_to_f64(inputs));
  const std::vector<double> x = inputs[0].to_doubles(), o = fp64[1].to_doubles();
  for (const Tie& t : ties) {
    EXPECT_EQ(t.node, node_of(g, "m"));
    EXPECT_LE(std::abs(t.margin), t.noise);
    EXPECT_GT(t.noise, 0);
    EXPECT_LT(t.noise, 1e-3) << "the band is f32 rounding of values up to ~300, not their size";
    const std::vector<Tensor> flipped = fp64_with_tie_flipped(g, inputs, t);
    // The element's share of the sum moves in or out, nothing else does.
    const double kept = o[static_cast<size_t>(t.element)];
    const double share = kept != 0 ? -kept : x[static_cast<size_t>(t.element)];
    EXPECT_NEAR(flipped[0].get(0) - fp64[0].get(0), share, 1e-9);
    EXPECT_EQ(flipped[1].get(t.element), kept != 0 ? 0.0 : x[static_cast<size_t>(t.element)]);
    EXPECT_NE(describe_tie(g, t).find("%m["), std::string::npos) << describe_tie(g, t);
  }
}

TEST(ComparisonTies, AStructuralZeroIsNoTie) {
  size_t total = 99;
  EXPECT_TRUE(find_ties(masked_sum(true), normal_inputs(), kMaxTies, total).empty());
  EXPECT_EQ(total, 0u);
}

TEST(ComparisonTies, OnlyFloatComparisonsAreLookedAt) {
  const Graph g = masked_sum(false);
  EXPECT_TRUE(has_float_comparison(g));
  EXPECT_FALSE(has_float_comparison(
      parse_graph("graph ints(%i: i64[4], %j: i64[4]) {\n  %m = ge(%i, %j)\n  return %m\n}\n")));
}

// The ties job on a timed call, as the timing audit asks for it: the ties of that call's own
// inputs, each flipped reference handed out as the elements the parent read of the call.
TEST(TiesJob, OnATimedCallItHandsOutTheReadElementsOfEachFlippedReference) {
  const std::filesystem::path dir = testing::fresh_test_dir("crucible_ties");
  const Graph g = masked_sum(false);
  std::ofstream(dir / "m.graph") << print_graph(g);
  const auto r = testing::run_crucible(
      "worker --job ties --graph " + (dir / "m.graph").string() +
      " --suite s --model m --backend eager --seed 3 --timing-sets --call-sets 7 --secret 11"
      " --verify-secret 13 --tensors " +
      (dir / "t").string() + " --report " + (dir / "report").string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const TensorGroups groups = read_tensor_file(dir / "t");
  ASSERT_GE(groups.size(), 2u) << "a call of 4096 rounding errors has ties";
  const std::vector<Tensor>& header = groups.back();
  ASSERT_EQ(header.size(), 3u);
  ASSERT_EQ(header[0].numel(), 2 * static_cast<int64_t>(groups.size() - 1));
  const std::vector<Tensor> inputs =
      call_input_set(second_input_set(with_varied_inputs(g), 3), 11, 7);
  for (size_t i = 0; i + 1 < groups.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    const Tie tie{static_cast<int>(header[0].get(2 * k)),
                  static_cast<int64_t>(header[0].get(2 * k + 1)), header[1].get(2 * k),
                  header[1].get(2 * k + 1)};
    EXPECT_EQ(tie.node, node_of(g, "m"));
    const std::vector<Tensor> full = fp64_with_tie_flipped(g, inputs, tie);
    ASSERT_EQ(groups[i].size(), full.size());
    for (size_t o = 0; o < full.size(); ++o) {
      const Tensor read = gather_elements(full[o], sampled_elements(13, 7, o, full[o].numel()));
      EXPECT_EQ(groups[i][o].to_doubles(), read.to_doubles()) << "tie " << k << " output " << o;
    }
  }
  std::filesystem::remove_all(dir);
}

// A ties job decides as many ties as fit in its share of the worker's time, and says how many
// there were: with no time to spare it decides none (a job killed at its limit decided none and
// said nothing), with time it decides them all.
TEST(TiesJob, DecidesAsManyTiesAsFitInItsTime) {
  const std::filesystem::path dir = testing::fresh_test_dir("crucible_ties_budget");
  std::ofstream(dir / "m.graph") << print_graph(masked_sum(false));
  auto decided = [&](const std::string& budget) {
    const auto r = testing::run_crucible(
        "worker --job ties --graph " + (dir / "m.graph").string() +
        " --suite s --model m --backend eager --seed 3 --budget-s " + budget + " --tensors " +
        (dir / "t").string() + " --report " + (dir / "report").string());
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    const TensorGroups groups = read_tensor_file(dir / "t");
    EXPECT_GT(groups.back()[2].get(0), 0) << "the ties there were";
    return groups.size() - 1;
  };
  EXPECT_EQ(decided("0.000001"), 0u);
  EXPECT_GT(decided("600"), 0u);
  std::filesystem::remove_all(dir);
}

// A reference of one output [8] with two ties whose effects touch elements 1 and 5.
struct Synthetic {
  AccuracyReference ref;
  std::vector<std::vector<Tensor>> flipped;
  Synthetic() {
    std::vector<double> f = {1, 2, 3, 4, 5, 6, 7, 8};
    ref.fp64 = {Tensor::from_doubles(DType::kF64, {8}, f)};
    ref.eager = {Tensor::from_doubles(DType::kF32, {8}, f)};
    for (int at : {1, 5}) {
      std::vector<double> g = f;
      g[static_cast<size_t>(at)] += 0.5;
      flipped.push_back({Tensor::from_doubles(DType::kF64, {8}, g)});
    }
  }
};

TEST(TieVerdict, TheTieThatExplainsTheOutputsMovesTheReference) {
  const Synthetic s;
  const Tensor res =
      Tensor::from_doubles(DType::kF32, {8}, std::vector<double>{1, 2, 3, 4, 5, 6.5, 7, 8});
  std::vector<size_t> chosen;
  const AccuracyReference moved = shifted_by_ties(s.ref, s.flipped, {res}, chosen);
  ASSERT_EQ(chosen, std::vector<size_t>{1});
  EXPECT_DOUBLE_EQ(moved.fp64[0].get(5), 6.5);
  EXPECT_DOUBLE_EQ(moved.eager[0].get(5), 6.5);
  EXPECT_DOUBLE_EQ(moved.fp64[0].get(1), 2);
}

TEST(TieVerdict, AnErrorNoTieExplainsMovesNothing) {
  const Synthetic s;
  // Off at element 3, where no tie reaches, and opposite to tie 0's move at element 1.
  const Tensor res =
      Tensor::from_doubles(DType::kF32, {8}, std::vector<double>{1, 1.5, 3, 5, 5, 6, 7, 8});
  std::vector<size_t> chosen;
  const AccuracyReference moved = shifted_by_ties(s.ref, s.flipped, {res}, chosen);
  EXPECT_TRUE(chosen.empty());
  EXPECT_DOUBLE_EQ(moved.fp64[0].get(1), 2);
  EXPECT_DOUBLE_EQ(moved.fp64[0].get(3), 4);
}

}  // namespace
}  // namespace crucible
