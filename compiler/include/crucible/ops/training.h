// Training steps as graphs: a model's forward graph with a loss, its backward (autodiff.h) and an
// optimizer's update appended, for one or more steps, in registry ops only, so every backend and
// the fp64 reference run a training step with no code of their own for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

enum class LossKind {
  kAuto,  // cross-entropy for a floating output of rank >= 2 whose last dim is > 1, else MSE
  kCrossEntropy,  // over the last dim, against int64 class labels (mean over the other dims)
  kMse,           // mean squared error against a target of the output's shape
};
enum class OptimizerKind { kSgd, kAdamW };

// "auto" | "cross_entropy" | "mse" and "sgd" | "adamw"; throw Error naming the accepted ones.
LossKind parse_loss(const std::string& text);
OptimizerKind parse_optimizer(const std::string& text);
const char* loss_name(LossKind k);
const char* optimizer_name(OptimizerKind k);

// PyTorch's torch.optim.SGD (dampening 0, not Nesterov) and torch.optim.AdamW (amsgrad off).
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;               // SGD
  double beta1 = 0.9, beta2 = 0.999;   // AdamW
  double eps = 1e-8;                   // AdamW
  std::optional<double> weight_decay;  // default: SGD 0 (L2 on the gradient), AdamW 0.01
  double decay() const { return weight_decay.value_or(kind == OptimizerKind::kAdamW ? 0.01 : 0); }
};

struct TrainingOptions {
  LossKind loss = LossKind::kAuto;
  OptimizerOptions optimizer;
  int steps = 1;  // unrolled in the graph, each on the same batch (as PyTorch's harness does)
  // The partitioner's rule (autodiff.h's recompute_cheap): the backward recomputes elementwise
  // and view results instead of keeping them from the forward. Off: it reads every one it needs.
  bool recompute = true;
};

// The parameters a step trains: floating ones, except those only ever read as batch_norm's running
// mean or variance (buffers, as PyTorch counts them).
std::vector<ValueId> trainable_params(const Graph& forward);

// The loss `options` resolves to for `forward`'s first output (kAuto decided).
LossKind resolve_loss(const Graph& forward, LossKind loss);

// The training graph of `forward` (its first output is the prediction; others are dropped):
//  inputs:  forward's inputs, then "target" (int64 labels for cross-entropy, the prediction's type
//           for MSE), then every trainable parameter P as an input with P's recipe (so a backend
//           cannot fold or pre-pack what a step changes), then every buffer B (batch_norm's
//           running statistics) likewise, then the optimizer state per P, zeros as at a first
//           step: "P.momentum" (SGD), "P.exp_avg" and "P.exp_avg_rms" (AdamW, whose second
//           moment is held as its square root: the same update, and any sign a timing audit's
//           varied inputs give it stays in the domain).
//  steps:   `steps` times forward, loss, backward and update on the same inputs, the step count t
//           a constant of each step's bias corrections (step k's names are prefixed "sK.");
//           batch_norm in its training form (the batch's statistics; the running ones moved by
//           momentum 0.1, as torch.nn.BatchNorm2d in train()).
//  outputs: "loss.K" of every step K, then "grad.K.P", "param.K.P" (updated) and "buffer.K.B"
//           for K = 1 and, when steps > 1, for the last step.
// Throws GraphError for a forward with no trainable parameter, a non-floating prediction, a
// parameter with data bound in memory (no recipe: save the graph first), an op without a gradient
// rule (named), or steps < 1.
Graph training_graph(const Graph& forward, const TrainingOptions& options);

}  // namespace crucible
