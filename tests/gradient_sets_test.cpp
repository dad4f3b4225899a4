// Gradient sets (crucible/ir/gradients.h): a training graph declares one per step, they print and
// parse back, a set's backward is the nodes only its gradients need, and a set that does not fit
// its graph is refused saying why.
#include <gtest/gtest.h>

#include <string>

#include "crucible/core/error.h"
#include "crucible/ir/gradients.h"
#include "crucible/ir/text_format.h"
#include "crucible/models/model_zoo.h"
#include "crucible/ops/training.h"

namespace crucible {
namespace {

const char* kMlp = R"(
graph mlp(%x: f32[4,6]) {
  param %w1: f32[8,6] = randn(seed=1, std=0.3)
  param %b1: f32[8] = randn(seed=2, std=0.1)
  param %w2: f32[3,8] = randn(seed=3, std=0.3)
  %h = linear(%x, %w1, %b1)
  %a = tanh(%h)
  %y = linear(%a, %w2)
  return %y
}
)";

TEST(GradientSets, ATrainingGraphDeclaresOneSealedSetPerStepThatRoundTrips) {
  TrainingOptions o;
  o.steps = 3;
  const Graph g = training_graph(parse_graph(kMlp), o);
  ASSERT_EQ(g.gradients().size(), 3u);
  for (int step = 1; step <= 3; ++step) {
    const GradientSet& set = g.gradients()[static_cast<size_t>(step - 1)];
    EXPECT_EQ(g.value(set.loss).name, "loss." + std::to_string(step));
    ASSERT_EQ(set.wrt.size(), 3u);
    const std::vector<bool> backward = backward_nodes(g, set);
    size_t n = 0;
    for (bool b : backward) n += b;
    EXPECT_GT(n, 3u) << "step " << step;
    EXPECT_TRUE(backward_is_sealed(g, set, backward)) << "step " << step;
  }
  // Step 1 differentiates by the parameters' inputs, and its gradients are the ones returned.
  EXPECT_EQ(g.gradients()[0].wrt[0], *g.find_value("w1"));
  EXPECT_EQ(g.gradients()[0].grads[0], *g.find_value("grad.1.w1"));
  EXPECT_EQ(g.gradients()[2].grads[2], *g.find_value("grad.3.w2"));
  // Step 2 starts from step 1's updated parameters.
  EXPECT_EQ(g.gradients()[1].wrt[0], *g.find_value("param.1.w1"));
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("  gradients(%loss.1 wrt %w1, %b1, %w2) = %grad.1.w1, %grad.1.b1, "
                      "%grad.1.w2\n"),
            std::string::npos);
  const Graph back = parse_graph(text);
  EXPECT_EQ(back.gradients(), g.gradients());
  EXPECT_EQ(print_graph(back), text);
}

// A later step's outputs come after an update (their rounding went through one); step 1's
// losses, gradients and parameters do not, nor does any output of a one-step or an inference graph.
TEST(GradientSets, OutputsAfterAnUpdateAreTheLaterStepsOnes) {
  TrainingOptions o;
  o.steps = 3;
  const Graph g = training_graph(parse_graph(kMlp), o);
  const std::vector<bool> after = outputs_after_an_update(g);
  ASSERT_EQ(after.size(), g.outputs().size());
  size_t later = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const std::string& name = g.value(g.outputs()[i]).name;
    const bool step1 = name == "loss.1" || name.rfind("grad.1.", 0) == 0 ||
                       name.rfind("param.1.", 0) == 0 || name.rfind("buffer.1.", 0) == 0;
    EXPECT_EQ(after[i], !step1) << name;
    later += after[i];
  }
  EXPECT_EQ(later, 2u + 2 * 3) << "loss.2, loss.3, and step 3's gradients and parameters";
  o.steps = 1;
  for (bool b : outputs_after_an_update(training_graph(parse_graph(kMlp), o))) EXPECT_FALSE(b);
  for (bool b : outputs_after_an_update(parse_graph(kMlp))) EXPECT_FALSE(b);
}

// A graph whose backward value is also returned: the gradients alone do not leave the backward,
// so a backend may not replace its nodes; a dead node reading one does not count.
TEST(GradientSets, ABackwardValueReadOutsideItUnsealsTheSet) {
  const Graph g = parse_graph(R"(
graph g(%x: f32[4], %w: f32[4]) {
  %y = mul(%x, %w)
  %loss = sum(%y)
  %one = full(shape=[4], value=1.0)
  %g = mul(%one, %x)
  %half = mul(%g, %one)
  gradients(%loss wrt %w) = %half
  return %loss, %half, %g
}
)");
  const GradientSet& set = g.gradients().at(0);
  const std::vector<bool> backward = backward_nodes(g, set);
  EXPECT_EQ(backward, (std::vector<bool>{false, false, true, true, true}));
  EXPECT_FALSE(backward_is_sealed(g, set, backward));  // %g is returned

  // Read only by a dead node (no output depends on it), the backward stays sealed.
  const Graph dead = parse_graph(R"(
graph g(%x: f32[4], %w: f32[4]) {
  %y = mul(%x, %w)
  %loss = sum(%y)
  %one = full(shape=[4], value=1.0)
  %g = mul(%one, %x)
  %half = mul(%g, %one)
  %unused = add(%g, %x)
  gradients(%loss wrt %w) = %half
  return %loss, %half
}
)");
  const GradientSet& kept = dead.gradients().at(0);
  EXPECT_TRUE(backward_is_sealed(dead, kept, backward_nodes(dead, kept)));
  EXPECT_EQ(live_nodes(dead), (std::vector<bool>{true, true, true, true, true, false}));
}

// Every built-in model's training graph leaves its backward through the gradients alone, so a
// backend with an autograd replaces every step's backward, none left running by a stray reader.
TEST(GradientSets, EveryZooModelsStepsAreSealed) {
  for (const models::ModelSpec& spec : models::model_zoo()) {
    const models::Variant small = models::Variant::kSmall;
    const Graph forward = models::build_model(spec, {small, spec.default_train_batch(small)});
    TrainingOptions o;
    o.steps = 2;
    const Graph g = training_graph(forward, o);
    ASSERT_EQ(g.gradients().size(), 2u) << spec.name;
    for (const GradientSet& set : g.gradients())
      EXPECT_TRUE(backward_is_sealed(g, set, backward_nodes(g, set)))
          << spec.name << " " << g.value(set.loss).name;
  }
}

struct BadSet {
  const char* body;
  const char* message;
};

class MalformedGradients : public ::testing::TestWithParam<BadSet> {};

TEST_P(MalformedGradients, AreRefusedSayingWhy) {
  const std::string text = std::string(R"(graph g(%x: f32[4], %w: f32[4], %n: i64[4]) {
  %y = mul(%x, %w)
  %loss = sum(%y)
  %g = neg(%x)
  %s = sum(%g)
  %c = cast(%n, dtype=f32)
)") + "  " + GetParam().body +
                           "\n  return %loss\n}\n";
  try {
    parse_graph(text, "t.graph");
    ADD_FAILURE() << "accepted: " << GetParam().body;
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    IR, MalformedGradients,
    ::testing::Values(
        BadSet{"gradients(%loss wrt %w) = %s",
               "gradients of %loss: %w is f32[4] but its gradient %s is f32[]"},
        BadSet{"gradients(%loss wrt %w, %x) = %g", "gradients of %loss: 2 values but 1 gradients"},
        BadSet{"gradients(%loss wrt %w) = %x", "the gradient %x is not a node's result"},
        BadSet{"gradients(%loss wrt %w) = %y", "the loss depends on the gradient %y"},
        BadSet{"gradients(%loss wrt %n) = %c", "gradients of %loss: %n is not floating"},
        BadSet{"gradients(%loss wrt %w) = %nowhere", "undefined value %nowhere"},
        BadSet{"gradients(%loss by %w) = %g", "expected 'wrt', got 'by'"}));

}  // namespace
}  // namespace crucible
