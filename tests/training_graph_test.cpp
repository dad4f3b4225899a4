// Training graphs (crucible/ops/training.h) checked against what they must equal: gradients
// against central finite differences of the loss in fp64, and the SGD and AdamW updates against
// torch.optim's formulas written out here independently (AdamW's second moment as PyTorch holds
// it, not as its square root); and the refusals.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"
#include "crucible/ops/autodiff.h"
#include "crucible/ops/interpreter.h"
#include "crucible/ops/training.h"

namespace crucible {
namespace {

const char* kMlp = R"(
graph mlp(%x: f64[4,6]) {
  param %w1: f64[8,6] = randn(seed=1, std=0.3)
  param %b1: f64[8] = randn(seed=2, std=0.1)
  param %w2: f64[3,8] = randn(seed=3, std=0.3)
  %h = linear(%x, %w1, %b1)
  %a = tanh(%h)
  %y = linear(%a, %w2)
  return %y
}
)";

using Named = std::map<std::string, std::vector<double>>;

// The graph's inputs (by name) and outputs (by name) for seed 5.
struct StepRun {
  Named in, out;
};

StepRun run(const Graph& g, const std::vector<Tensor>& inputs) {
  StepRun r;
  for (size_t k = 0; k < inputs.size(); ++k)
    r.in[g.value(g.inputs()[k]).name] = inputs[k].to_doubles();
  Interpreter interp(g);
  const std::vector<Tensor> outs = interp.run(inputs);
  for (size_t k = 0; k < outs.size(); ++k)
    r.out[g.value(g.outputs()[k]).name] = outs[k].to_doubles();
  return r;
}

StepRun run(const Graph& g) { return run(g, make_inputs(g, 5)); }

size_t input_index(const Graph& g, const std::string& name) {
  for (size_t k = 0; k < g.inputs().size(); ++k)
    if (g.value(g.inputs()[k]).name == name) return k;
  ADD_FAILURE() << "no input " << name;
  return 0;
}

// Central differences of loss.1 at a few elements of every parameter, against grad.1.P.
void ExpectGradientsAreFiniteDifferences(const Graph& forward, LossKind loss,
                                         const std::vector<std::string>& params = {"w1", "b1",
                                                                                   "w2"}) {
  TrainingOptions o;
  o.loss = loss;
  const Graph g = training_graph(forward, o);
  const std::vector<Tensor> inputs = make_inputs(g, 5);
  const StepRun base = run(g, inputs);
  for (const std::string& p : params) {
    const size_t k = input_index(g, p);
    const std::vector<double>& grad = base.out.at("grad.1." + p);
    for (int64_t e : {int64_t{0}, inputs[k].numel() / 2, inputs[k].numel() - 1}) {
      const double h = 1e-6;
      double at[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<Tensor> moved = inputs;
        std::vector<double> v = inputs[k].to_doubles();
        v[e] += side == 0 ? h : -h;
        moved[k] = Tensor::from_doubles(DType::kF64, inputs[k].shape(), v);
        at[side] = run(g, moved).out.at("loss.1")[0];
      }
      const double fd = (at[0] - at[1]) / (2 * h);
      EXPECT_NEAR(grad[e], fd, 1e-7 + 1e-5 * std::abs(fd)) << p << "[" << e << "]";
    }
  }
}

TEST(TrainingGraph, CrossEntropyGradientsAreFiniteDifferencesOfTheLoss) {
  ExpectGradientsAreFiniteDifferences(parse_graph(kMlp), LossKind::kCrossEntropy);
}

TEST(TrainingGraph, MseGradientsAreFiniteDifferencesOfTheLoss) {
  ExpectGradientsAreFiniteDifferences(parse_graph(kMlp), LossKind::kMse);
}

TEST(TrainingGraph, CrossEntropyIsTheMeanNegativeLogLikelihoodOfTheLabels) {
  TrainingOptions o;  // auto: a [4,3] prediction is a classifier
  const Graph g = training_graph(parse_graph(kMlp), o);
  EXPECT_EQ(g.value(g.inputs()[1]).type.dtype, DType::kI64);
  // The logits, recomputed from the inputs by the forward graph alone.
  const std::vector<Tensor> inputs = make_inputs(g, 5);
  Graph forward = parse_graph(kMlp);
  std::vector<Tensor> fin = {inputs[0]};
  std::vector<double> logits;
  {
    // The forward with the training graph's parameter inputs bound as its parameters' data.
    Graph bound("mlp");
    const ValueId x = bound.add_input("x", forward.value(forward.inputs()[0]).type);
    const ValueId w1 = bound.add_param_data("w1", inputs[input_index(g, "w1")]);
    const ValueId b1 = bound.add_param_data("b1", inputs[input_index(g, "b1")]);
    const ValueId w2 = bound.add_param_data("w2", inputs[input_index(g, "w2")]);
    const ValueId h = bound.add_node("linear", {x, w1, b1});
    const ValueId a = bound.add_node("tanh", {h});
    bound.set_outputs({bound.add_node("linear", {a, w2})});
    logits = Interpreter(bound).run(fin)[0].to_doubles();
  }
  const std::vector<double> labels = inputs[1].to_doubles();
  double nll = 0;
  for (int r = 0; r < 4; ++r) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(logits[r * 3 + c]);
    nll -= logits[r * 3 + static_cast<int>(labels[r])] - std::log(z);
  }
  EXPECT_NEAR(run(g, inputs).out.at("loss.1")[0], nll / 4, 1e-12);
}

TEST(TrainingGraph, SgdWithMomentumAndDecayIsTorchOptimSgd) {
  TrainingOptions o;
  o.steps = 2;
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 0.1;
  const Graph g = training_graph(parse_graph(kMlp), o);
  const StepRun r = run(g);
  for (const char* name : {"w1", "b1", "w2"}) {
    const std::string p = name;
    const std::vector<double>& p0 = r.in.at(p);
    const std::vector<double>& g1 = r.out.at("grad.1." + p);
    const std::vector<double>& p1 = r.out.at("param.1." + p);
    const std::vector<double>& g2 = r.out.at("grad.2." + p);
    const std::vector<double>& p2 = r.out.at("param.2." + p);
    for (size_t i = 0; i < p0.size(); ++i) {
      const double buf1 = g1[i] + 0.1 * p0[i];  // torch: the first step's buffer is the gradient
      EXPECT_NEAR(p1[i], p0[i] - 0.05 * buf1, 1e-14) << p << "[" << i << "]";
      const double buf2 = 0.9 * buf1 + (g2[i] + 0.1 * p1[i]);
      EXPECT_NEAR(p2[i], p1[i] - 0.05 * buf2, 1e-14) << p << "[" << i << "]";
    }
  }
}

TEST(TrainingGraph, AdamWIsTorchOptimAdamW) {
  TrainingOptions o;
  o.steps = 3;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.lr = 0.01;
  const Graph g = training_graph(parse_graph(kMlp), o);
  const StepRun r = run(g);
  // Steps 1 and 3 are outputs; step 2's gradient is not, so the state is followed from step 1
  // only: its parameters after step 1 from the zero state.
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.01, wd = 0.01;
  for (const char* name : {"w1", "b1", "w2"}) {
    const std::string p = name;
    const std::vector<double>& p0 = r.in.at(p);
    const std::vector<double>& g1 = r.out.at("grad.1." + p);
    const std::vector<double>& p1 = r.out.at("param.1." + p);
    for (size_t i = 0; i < p0.size(); ++i) {
      const double m = (1 - b1) * g1[i];
      const double v = (1 - b2) * g1[i] * g1[i];
      const double mhat = m / (1 - b1), vhat = v / (1 - b2);
      const double want = p0[i] * (1 - lr * wd) - lr * mhat / (std::sqrt(vhat) + eps);
      EXPECT_NEAR(p1[i], want, 1e-14) << p << "[" << i << "]";
    }
  }
  EXPECT_LT(r.out.at("loss.3")[0], r.out.at("loss.1")[0]);
}

TEST(TrainingGraph, AdamWSecondStepUsesBiasCorrectedMoments) {
  TrainingOptions o;
  o.steps = 2;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.lr = 0.02;
  o.optimizer.weight_decay = 0.05;
  const Graph g = training_graph(parse_graph(kMlp), o);
  const StepRun r = run(g);
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.02, wd = 0.05;
  for (const char* name : {"w1", "b1", "w2"}) {
    const std::string p = name;
    const std::vector<double>& g1 = r.out.at("grad.1." + p);
    const std::vector<double>& p1 = r.out.at("param.1." + p);
    const std::vector<double>& g2 = r.out.at("grad.2." + p);
    const std::vector<double>& p2 = r.out.at("param.2." + p);
    for (size_t i = 0; i < p1.size(); ++i) {
      const double m = b1 * ((1 - b1) * g1[i]) + (1 - b1) * g2[i];
      const double v = b2 * ((1 - b2) * g1[i] * g1[i]) + (1 - b2) * g2[i] * g2[i];
      const double mhat = m / (1 - b1 * b1), vhat = v / (1 - b2 * b2);
      const double want = p1[i] * (1 - lr * wd) - lr * mhat / (std::sqrt(vhat) + eps);
      EXPECT_NEAR(p2[i], want, 1e-13) << p << "[" << i << "]";
    }
  }
}

TEST(TrainingGraph, SgdLowersTheLossOverSteps) {
  TrainingOptions o;
  o.steps = 5;
  o.optimizer.lr = 0.2;
  const Graph g = training_graph(parse_graph(kMlp), o);
  const StepRun r = run(g);
  for (int k = 1; k < 5; ++k)
    EXPECT_LT(r.out.at(fmt::format("loss.{}", k + 1))[0], r.out.at(fmt::format("loss.{}", k))[0]);
}

TEST(TrainingGraph, InputsAreDataTargetParametersAndZeroState) {
  TrainingOptions o;
  o.optimizer.kind = OptimizerKind::kAdamW;
  const Graph forward = parse_graph(kMlp);
  const Graph g = training_graph(forward, o);
  std::vector<std::string> names;
  for (ValueId v : g.inputs()) names.push_back(g.value(v).name);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "target", "w1", "b1", "w2", "w1.exp_avg",
                                             "w1.exp_avg_rms", "b1.exp_avg", "b1.exp_avg_rms",
                                             "w2.exp_avg", "w2.exp_avg_rms"}));
  EXPECT_TRUE(g.params().empty());  // nothing a backend could pack ahead of the step
  // Each parameter keeps its recipe: the weights a step starts from are the model's.
  EXPECT_EQ(g.value(g.inputs()[2]).init, forward.value(*forward.find_value("w1")).init);
  EXPECT_EQ(g.value(g.inputs()[5]).init.kind, "zeros");
  std::vector<std::string> outs;
  for (ValueId v : g.outputs()) outs.push_back(g.value(v).name);
  EXPECT_EQ(outs, (std::vector<std::string>{"loss.1", "grad.1.w1", "grad.1.b1", "grad.1.w2",
                                            "param.1.w1", "param.1.b1", "param.1.w2"}));
  // The text form reads back to the same graph.
  EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
}

TEST(TrainingGraph, BackwardNodesAreNamedAfterTheirForwardValue) {
  const Graph g = training_graph(parse_graph(kMlp), {});
  int tanh_backward = 0;
  for (const Node& n : g.nodes())
    if (g.value(n.output).name.rfind("a.bwd", 0) == 0) ++tanh_backward;
  EXPECT_GT(tanh_backward, 0);
}

const char* kConvBn = R"(
graph cbn(%x: f64[3,2,4,5]) {
  param %w: f64[3,2,3,3] = randn(seed=1, std=0.3)
  param %g: f64[3] = uniform(seed=2, low=0.5, high=1.5)
  param %b: f64[3] = randn(seed=3, std=0.1)
  param %m: f64[3] = randn(seed=4, std=0.1)
  param %v: f64[3] = uniform(seed=5, low=0.5, high=1.5)
  %c = conv2d(%x, %w, padding=[1,1])
  %n = batch_norm(%c, %g, %b, %m, %v, eps=1e-05)
  %r = relu(%n)
  %p = max_pool2d(%r, kernel_size=[2,2], stride=[1,1])
  return %p
}
)";

// A training step normalizes by the batch's statistics, so the gradient reaches the conv weight
// through them too (finite differences of the whole step's loss say so).
TEST(TrainingGraph, ConvBatchNormGradientsAreFiniteDifferences) {
  ExpectGradientsAreFiniteDifferences(parse_graph(kConvBn), LossKind::kCrossEntropy,
                                      {"w", "g", "b"});
}

// The running statistics move as torch.nn.BatchNorm2d's in train(): 0.9 old + 0.1 batch, the
// variance's batch part unbiased; the step's result does not read them.
TEST(TrainingGraph, BatchNormRunningStatisticsMoveByMomentum) {
  Graph bn = parse_graph(R"(
graph bn(%x: f64[4,2,3,3]) {
  param %g: f64[2] = ones()
  param %b: f64[2] = zeros()
  param %m: f64[2] = full(value=0.5)
  param %v: f64[2] = full(value=2.0)
  %y = batch_norm(%x, %g, %b, %m, %v, eps=1e-05)
  return %y
}
)");
  TrainingOptions o;
  o.steps = 2;
  o.loss = LossKind::kMse;
  const Graph g = training_graph(bn, o);
  const StepRun r = run(g);
  const std::vector<double>& x = r.in.at("x");
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) sum += x[(n * 2 + c) * 9 + i];
    const double mean = sum / 36;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) sq += std::pow(x[(n * 2 + c) * 9 + i] - mean, 2);
    const double m1 = 0.9 * 0.5 + 0.1 * mean, v1 = 0.9 * 2.0 + 0.1 * sq / 35;
    EXPECT_NEAR(r.out.at("buffer.1.m")[c], m1, 1e-14);
    EXPECT_NEAR(r.out.at("buffer.1.v")[c], v1, 1e-14);
    // Step 2 sees the same batch: the statistics move again by the same rule.
    EXPECT_NEAR(r.out.at("buffer.2.m")[c], 0.9 * m1 + 0.1 * mean, 1e-14);
    EXPECT_NEAR(r.out.at("buffer.2.v")[c], 0.9 * v1 + 0.1 * sq / 35, 1e-14);
  }
  // The buffers are inputs after the parameters, with their recipes; never trained.
  EXPECT_EQ(g.value(g.inputs()[4]).name, "m");
  EXPECT_FALSE(g.find_value("grad.1.m").has_value());
}

// The partitioner's rule changes what lives from the forward to the backward, never a value: the
// steps with and without recompute agree bit for bit in fp64 on eager, and fewer bytes are saved.
TEST(TrainingGraph, RecomputingCheapValuesChangesNoResultAndSavesLess) {
  const Graph forward = parse_graph(kConvBn);
  TrainingOptions on, off;
  off.recompute = false;
  const Graph a = training_graph(forward, off), b = training_graph(forward, on);
  const std::vector<Tensor> inputs = make_inputs(a, 5);
  const std::vector<Tensor> x = Interpreter(a).run(inputs), y = Interpreter(b).run(inputs);
  ASSERT_EQ(x.size(), y.size());
  for (size_t k = 0; k < x.size(); ++k) EXPECT_EQ(x[k].to_doubles(), y[k].to_doubles()) << k;
  // The joint graphs: the forward is the loss graph's nodes, the backward what follows.
  auto first_backward = [](const Graph& g) {
    for (size_t i = 0; i < g.nodes().size(); ++i)
      if (g.value(g.nodes()[i].output).name.find(".bwd") != std::string::npos) return i;
    return g.nodes().size();
  };
  const SavedActivations kept = saved_activations(a, first_backward(a));
  const SavedActivations fewer = saved_activations(b, first_backward(b));
  EXPECT_LT(fewer.bytes, kept.bytes) << kept.bytes << " -> " << fewer.bytes;
  EXPECT_LT(fewer.saved.size(), kept.saved.size());
  // What the backward recomputed carries the suffix; batch norm's normalized value is one.
  EXPECT_TRUE(b.find_value("n.xhat.recompute").has_value());
  // relu's result feeds the max pool whose result the backward reads: it stays saved (its copy
  // might differ in the last bit, and the pool's rule finds each maximum by equality).
  EXPECT_FALSE(b.find_value("r.recompute").has_value());
  bool r_saved = false;
  for (ValueId v : fewer.saved) r_saved = r_saved || b.value(v).name == "r";
  EXPECT_TRUE(r_saved);
}

TEST(TrainingGraph, BatchNormRunningStatisticsAreNotTrained) {
  const Graph g = parse_graph(R"(
graph bn(%x: f32[2,3,4,4]) {
  param %w: f32[3] = ones()
  param %b: f32[3] = zeros()
  param %m: f32[3] = zeros()
  param %v: f32[3] = ones()
  %y = batch_norm(%x, %w, %b, %m, %v, eps=1e-05)
  return %y
}
)");
  std::vector<std::string> names;
  for (ValueId p : trainable_params(g)) names.push_back(g.value(p).name);
  EXPECT_EQ(names, (std::vector<std::string>{"w", "b"}));
}

TEST(TrainingGraph, RefusesWhatCannotTrainSayingWhy) {
  const Graph mlp = parse_graph(kMlp);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  TrainingOptions zero;
  zero.steps = 0;
  EXPECT_NE(message([&] { training_graph(mlp, zero); }).find("steps must be at least 1"),
            std::string::npos);
  EXPECT_NE(message([] {
              training_graph(parse_graph("graph g(%x: f32[2,3]) {\n  %y = relu(%x)\n"
                                         "  return %y\n}\n"),
                             {});
            }).find("no floating parameter"),
            std::string::npos);
  EXPECT_NE(message([] {
              training_graph(parse_graph("graph g(%x: f32[2,3]) {\n"
                                         "  param %w: f32[2,3] = ones()\n"
                                         "  %y = mul(%x, %w)\n"
                                         "  %z = pad(%y, pads=[0, 1, 0, 1], mode=\"reflect\")\n"
                                         "  return %z\n}\n"),
                             {});
            }).find("pad mode=reflect has no gradient rule"),
            std::string::npos);
  EXPECT_NE(message([] {
              training_graph(parse_graph("graph g(%x: f32[2,3]) {\n"
                                         "  param %w: f32[2,3] = ones()\n"
                                         "  %y = mul(%x, %w)\n  %z = argmax(%y, dim=1)\n"
                                         "  return %z\n}\n"),
                             {});
            }).find("must be floating"),
            std::string::npos);
  Graph bound("bound");
  const ValueId x = bound.add_input("x", {DType::kF32, {2, 3}});
  const ValueId w = bound.add_param_data("w", Tensor::full(DType::kF32, {2, 3}, 1));
  bound.set_outputs({bound.add_node("mul", {x, w})});
  EXPECT_NE(message([&] { training_graph(bound, {}); }).find("%w has data bound in memory"),
            std::string::npos);
  EXPECT_NE(message([] { parse_loss("hinge"); }).find("auto, cross_entropy or mse"),
            std::string::npos);
  EXPECT_NE(message([] { parse_optimizer("lamb"); }).find("sgd or adamw"), std::string::npos);
}

}  // namespace
}  // namespace crucible
