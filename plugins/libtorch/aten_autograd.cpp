// Gradient sets through ATen's autograd (see aten_autograd.h): which nodes ATen records and which
// it skips, and the torch::autograd::grad call that stands in for the skipped ones.
#include "aten_autograd.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "crucible/ir/gradients.h"

namespace crucible::libtorch {

AutogradPlan plan_autograd(const Graph& g) {
  AutogradPlan plan;
  plan.declared = g.gradients().size();
  plan.skipped.assign(g.nodes().size(), false);
  plan.recorded.assign(g.nodes().size(), false);
  plan.losses_at.assign(g.nodes().size(), {});
  plan.leaf.assign(g.values().size(), false);
  for (const GradientSet& set : g.gradients()) {
    const std::vector<bool> backward = backward_nodes(g, set);
    const Value& loss = g.value(set.loss);
    // A loss that is an input has no recorded forward: its gradients are the graph's own.
    if (loss.kind != ValueKind::kNode || !backward_is_sealed(g, set, backward)) continue;
    for (size_t i = 0; i < backward.size(); ++i) plan.skipped[i] = plan.skipped[i] || backward[i];
    const std::vector<bool> forward = nodes_reaching(g, {set.loss});
    for (size_t i = 0; i < forward.size(); ++i) plan.recorded[i] = plan.recorded[i] || forward[i];
    plan.losses_at[static_cast<size_t>(loss.node)].push_back(plan.sets.size());
    for (ValueId w : set.wrt) plan.leaf[static_cast<size_t>(w)] = true;
    plan.sets.push_back(set);
  }
  // A dead node may read what a skipped one would have made (a mask chain's unused last link).
  if (!plan.sets.empty()) {
    const std::vector<bool> live = live_nodes(g);
    for (size_t i = 0; i < live.size(); ++i) plan.skipped[i] = plan.skipped[i] || !live[i];
  }
  return plan;
}

std::string AutogradPlan::summary() const {
  if (declared == 0) return "";
  return fmt::format("autograd: ATen for {} of {} gradient sets", sets.size(), declared);
}

std::vector<std::vector<ValueId>> AutogradPlan::reads(const Graph& g) const {
  std::vector<std::vector<ValueId>> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    out.push_back(skipped[i] ? std::vector<ValueId>{} : g.nodes()[i].operands);
    // Autograd reads each wrt once the loss is made, whoever read it last before.
    for (size_t s : losses_at[i])
      out[i].insert(out[i].end(), sets[s].wrt.begin(), sets[s].wrt.end());
  }
  return out;
}

at::Tensor as_leaf(const at::Tensor& t) { return t.detach().requires_grad_(true); }

void take_gradients(const GradientSet& set, std::vector<at::Tensor>& env) {
  const at::Tensor& loss = env[static_cast<size_t>(set.loss)];
  std::vector<at::Tensor> wrt;
  for (ValueId w : set.wrt) wrt.push_back(env[static_cast<size_t>(w)]);
  std::vector<at::Tensor> grads(wrt.size());
  if (loss.requires_grad()) {
    grads = torch::autograd::grad({loss}, wrt, {at::ones_like(loss)}, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  }
  for (size_t i = 0; i < wrt.size(); ++i) {
    env[static_cast<size_t>(set.grads[i])] =
        grads[i].defined() ? grads[i] : at::zeros_like(wrt[i].detach());
  }
}

}  // namespace crucible::libtorch
