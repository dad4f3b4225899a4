// Backward graphs are graphs: the joint graph (crucible/ops/autodiff.h) of a small transformer
// block and of a convolution-free classifier runs on codegen as on eager, fused and unfused, with
// every gradient within the harness's accuracy rule (the fp64 reference where summation orders
// part). No backend has code of its own for gradients.
#include <gtest/gtest.h>

#include "backend_pair.h"
#include "crucible/ir/text_format.h"
#include "crucible/ops/autodiff.h"
#include "crucible/ops/training.h"

namespace crucible {
namespace {

class CodegenBackward : public testing::BackendPair {
 protected:
  // Every floating input and parameter is a variable.
  static void ExpectJointSameAsEager(const Graph& forward) {
    std::vector<ValueId> wrt;
    for (ValueId v : forward.inputs()) {
      if (is_floating(forward.value(v).type.dtype)) wrt.push_back(v);
    }
    for (ValueId v : forward.params()) wrt.push_back(v);
    const Graph joint = joint_graph(forward, wrt);
    ASSERT_EQ(joint.outputs().size(), forward.outputs().size() + wrt.size());
    for (const char* fusion : {"on", "off"}) {
      SCOPED_TRACE(std::string("fusion=") + fusion);
      plugin::Options o;
      o.config["fusion"] = fusion;
      ExpectSameAsEager(joint, {}, o);
    }
  }
};

TEST_F(CodegenBackward, TransformerBlockGradientsMatchEager) {
  ExpectJointSameAsEager(parse_graph(R"(
graph block(%x: f32[2,8,16]) {
  param %wq: f32[16,16] = randn(seed=1, std=0.2)
  param %wk: f32[16,16] = randn(seed=2, std=0.2)
  param %wv: f32[16,16] = randn(seed=3, std=0.2)
  param %w1: f32[32,16] = randn(seed=4, std=0.2)
  param %b1: f32[32] = randn(seed=5, std=0.1)
  param %w2: f32[16,32] = randn(seed=6, std=0.2)
  param %g: f32[16] = randn(seed=7, std=0.1)
  %q = linear(%x, %wq)
  %k = linear(%x, %wk)
  %v = linear(%x, %wv)
  %kt = transpose(%k, dim0=1, dim1=2)
  %s = matmul(%q, %kt)
  %p = softmax(%s, dim=-1)
  %a = matmul(%p, %v)
  %r = add(%a, %x)
  %n = layer_norm(%r, %g, normalized_shape=[16], eps=1e-05)
  %h = linear(%n, %w1, %b1)
  %u = gelu(%h)
  %o = linear(%u, %w2)
  %y = add(%o, %n)
  %l = mean(%y)
  return %l
}
)"));
}

TEST_F(CodegenBackward, ClassifierWithEmbeddingAndLogSoftmaxMatchesEager) {
  ExpectJointSameAsEager(parse_graph(R"(
graph cls(%ids: i64[4,6] = randint(low=0, high=10), %t: f32[4,5]) {
  param %emb: f32[10,8] = randn(seed=1, std=0.5)
  param %w: f32[5,8] = randn(seed=2, std=0.3)
  param %b: f32[5] = zeros()
  %e = embedding(%emb, %ids)
  %m = mean(%e, dims=[1])
  %z = linear(%m, %w, %b)
  %s = silu(%z)
  %lp = log_softmax(%s, dim=-1)
  %nl = mul(%lp, %t)
  %tot = sum(%nl)
  %loss = neg(%tot)
  return %loss
}
)"));
}

// A whole training step, three of them unrolled: AdamW's updates (elementwise chains over every
// parameter) and the cross-entropy's backward fuse like any other graph's nodes.
TEST_F(CodegenBackward, AdamWTrainingStepsMatchEager) {
  const Graph forward = parse_graph(R"(
graph lm(%ids: i64[2,6] = randint(low=0, high=12)) {
  param %emb: f32[12,16] = randn(seed=1, std=0.5)
  param %w1: f32[32,16] = randn(seed=2, std=0.2)
  param %b1: f32[32] = zeros()
  param %w2: f32[12,32] = randn(seed=3, std=0.2)
  param %g: f32[32] = ones()
  param %beta: f32[32] = zeros()
  %e = embedding(%emb, %ids)
  %h = linear(%e, %w1, %b1)
  %n = layer_norm(%h, %g, %beta, normalized_shape=[32], eps=1e-05)
  %u = gelu(%n)
  %logits = linear(%u, %w2)
  return %logits
}
)");
  TrainingOptions o;
  o.steps = 3;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.lr = 0.01;
  const Graph step = training_graph(forward, o);
  for (const char* fusion : {"on", "off"}) {
    SCOPED_TRACE(std::string("fusion=") + fusion);
    plugin::Options opts;
    opts.config["fusion"] = fusion;
    ExpectSameAsEager(step, {}, opts);
  }
}

}  // namespace
}  // namespace crucible
