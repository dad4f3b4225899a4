// Training through ATen's autograd: a graph's gradient sets (crucible/ir/gradients.h) taken by
// torch::autograd::grad from the forward ATen recorded, as a PyTorch user's loss.backward() would,
// instead of by running the graph's own backward nodes.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::libtorch {

// What an executable does differently for the sets it takes through autograd. A set whose
// backward values are read outside it (a minified or hand-edited graph) keeps its nodes.
struct AutogradPlan {
  std::vector<GradientSet> sets;               // taken through autograd
  size_t declared = 0;                         // gradient sets the graph declares
  std::vector<bool> skipped;                   // per node: a taken set's backward, or dead
  std::vector<bool> recorded;                  // per node: on the way to a taken set's loss
  std::vector<std::vector<size_t>> losses_at;  // per node: the sets whose loss it computes
  std::vector<bool> leaf;                      // per value: some taken set's wrt

  bool empty() const { return sets.empty(); }
  // For the version string: "autograd: ATen for 3 of 3 gradient sets".
  std::string summary() const;
  // Per node, the values it reads (none for a skipped node; a loss's node also each wrt of its
  // sets, which autograd reads then): what frees intermediates.
  std::vector<std::vector<ValueId>> reads(const Graph& g) const;
};

AutogradPlan plan_autograd(const Graph& g);

// `t` as a leaf that requires grad (sharing its storage), for a value some set differentiates by.
at::Tensor as_leaf(const at::Tensor& t);

// Binds env[set.grads[i]] to d(sum of env[set.loss]) / d(env[set.wrt[i]]) by ATen's autograd
// (zeros where the loss does not depend on it), freeing the recorded graph.
void take_gradients(const GradientSet& set, std::vector<at::Tensor>& env);

}  // namespace crucible::libtorch
