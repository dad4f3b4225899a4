// What the training graph is built from: a loss on a prediction, an optimizer's update of one
// parameter, and copying one graph's nodes into another (a step appended once per step).
#pragma once

#include <string>
#include <vector>

#include "crucible/ops/training.h"
#include "graph_copy.h"

namespace crucible::training {

// The loss node (a 0-d value named `name`) of `prediction` against `target`.
ValueId add_loss(Graph& g, LossKind kind, ValueId prediction, ValueId target,
                 const std::string& name);

// The target input a loss wants for `prediction`: int64 labels in [0, classes) for
// cross-entropy, randn of the prediction's type for MSE.
ValueId add_target(Graph& g, LossKind kind, const TensorType& prediction);

// One parameter being trained: its current value and its optimizer state, in the order
// state_names() lists.
struct Trained {
  std::string name;  // the parameter's
  ValueId value = -1;
  std::vector<ValueId> state;
};

// The state an optimizer keeps per parameter, as suffixes of the parameter's name.
std::vector<std::string> state_names(const OptimizerOptions& o);

// Appends step `t`'s (1-based) update of `p` by gradient `grad`; p.value and p.state then name the
// updated values.
void add_update(Graph& g, const OptimizerOptions& o, int t, ValueId grad, Trained& p);

// A buffer's new value after a step: what `buffer` (an input of the loss graph) becomes.
struct BufferUpdate {
  ValueId buffer = -1;
  ValueId updated = -1;
};

// batch_norm node `n` (operands mapped to `operands` of `g`) in its training form, its result
// named `name`; the running mean and variance updates are appended to `updates`.
ValueId add_batch_norm_train(Graph& g, const Node& n, const std::vector<ValueId>& operands,
                             const std::string& name, std::vector<BufferUpdate>& updates);

// Copies every node of `from` into `into`, names prefixed with `prefix`; `map` (from's value ids
// to into's) must hold from's inputs and parameters and gets its nodes. A name already taken in
// `into` gets a fresh one.
void copy_nodes(Graph& into, const Graph& from, std::vector<ValueId>& map,
                const std::string& prefix);

}  // namespace crucible::training
