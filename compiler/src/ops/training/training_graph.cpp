// The training graph (see crucible/ops/training.h): the loss graph with parameters as inputs, its
// joint forward-backward graph, and that joint graph copied once per step with the updates after.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "crucible/core/error.h"
#include "crucible/ops/autodiff.h"
#include "training/training_internal.h"

namespace crucible {

namespace training {

void copy_nodes(Graph& into, const Graph& from, std::vector<ValueId>& map,
                const std::string& prefix) {
  map.resize(from.values().size(), -1);
  for (const Node& n : from.nodes()) {
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(map[o]);
    const std::string name = free_name(into, prefix + from.value(n.output).name);
    map[n.output] = into.add_node(n.op, std::move(operands), n.attrs, name, n.loc);
  }
}

namespace {

// A parameter a step makes an input: its recipe is its first value.
ValueId leaf_as_input(Graph& into, const Graph& forward, ValueId v) {
  if (forward.value(v).init.empty())
    throw GraphError(fmt::format(
        "training: parameter %{} has data bound in memory and no recipe to make it an input "
        "(save the graph to a file first)",
        forward.value(v).name));
  return copy_leaf(into, forward, v, true);
}

// `forward` ending in the loss: its inputs, the target, its trainable parameters and then its
// buffers as inputs (in that order), its other parameters as parameters; batch_norm in its
// training form. Outputs: the loss, then each buffer's updated value.
Graph loss_graph(const Graph& forward, const std::vector<ValueId>& trained,
                 const std::vector<ValueId>& buffers, LossKind loss) {
  Graph g(forward.name());
  g.set_base_dir(forward.base_dir());
  g.set_source_file(forward.source_file());
  std::vector<ValueId> map(forward.values().size(), -1);
  for (ValueId v : forward.inputs()) map[v] = copy_leaf(g, forward, v, false);
  const ValueId prediction = forward.outputs().front();
  const ValueId target = add_target(g, loss, forward.value(prediction).type);
  for (ValueId v : trained) map[v] = leaf_as_input(g, forward, v);
  for (ValueId v : buffers) map[v] = leaf_as_input(g, forward, v);
  for (ValueId v : forward.params()) {
    if (map[v] < 0) map[v] = copy_leaf(g, forward, v, false);
  }
  std::vector<BufferUpdate> updates;
  for (const Node& n : forward.nodes()) {
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) operands.push_back(map[o]);
    const std::string name = free_name(g, forward.value(n.output).name);
    map[n.output] = n.op == "batch_norm"
                        ? add_batch_norm_train(g, n, operands, name, updates)
                        : g.add_node(n.op, std::move(operands), n.attrs, name, n.loc);
  }
  std::vector<ValueId> outputs = {add_loss(g, loss, map[prediction], target, free_name(g, "loss"))};
  for (ValueId v : buffers) {
    ValueId now = map[v];
    for (const BufferUpdate& u : updates)
      if (u.buffer == map[v]) now = u.updated;
    outputs.push_back(now);
  }
  g.set_outputs(outputs);
  return g;
}

// Floating parameters a step does not train: batch_norm's running statistics, which it updates.
std::vector<ValueId> buffers_of(const Graph& forward, const std::vector<ValueId>& trained) {
  std::vector<ValueId> out;
  for (ValueId p : forward.params()) {
    if (is_floating(forward.value(p).type.dtype) &&
        std::find(trained.begin(), trained.end(), p) == trained.end())
      out.push_back(p);
  }
  return out;
}

}  // namespace

}  // namespace training

LossKind parse_loss(const std::string& text) {
  if (text == "auto") return LossKind::kAuto;
  if (text == "cross_entropy") return LossKind::kCrossEntropy;
  if (text == "mse") return LossKind::kMse;
  throw Error(fmt::format("unknown loss '{}' (auto, cross_entropy or mse)", text));
}

OptimizerKind parse_optimizer(const std::string& text) {
  if (text == "sgd") return OptimizerKind::kSgd;
  if (text == "adamw") return OptimizerKind::kAdamW;
  throw Error(fmt::format("unknown optimizer '{}' (sgd or adamw)", text));
}

const char* loss_name(LossKind k) {
  switch (k) {
    case LossKind::kAuto:
      return "auto";
    case LossKind::kCrossEntropy:
      return "cross_entropy";
    case LossKind::kMse:
      return "mse";
  }
  return "?";
}

const char* optimizer_name(OptimizerKind k) { return k == OptimizerKind::kAdamW ? "adamw" : "sgd"; }

std::vector<ValueId> trainable_params(const Graph& forward) {
  std::set<ValueId> stat_uses, other_uses;
  for (const Node& n : forward.nodes()) {
    for (size_t i = 0; i < n.operands.size(); ++i) {
      const bool running_stat = n.op == "batch_norm" && (i == 3 || i == 4);
      (running_stat ? stat_uses : other_uses).insert(n.operands[i]);
    }
  }
  std::vector<ValueId> out;
  for (ValueId p : forward.params()) {
    const bool buffer = stat_uses.contains(p) && !other_uses.contains(p);
    if (is_floating(forward.value(p).type.dtype) && !buffer) out.push_back(p);
  }
  return out;
}

LossKind resolve_loss(const Graph& forward, LossKind loss) {
  if (loss != LossKind::kAuto || forward.outputs().empty()) return loss;
  const TensorType& t = forward.value(forward.outputs().front()).type;
  return t.shape.size() >= 2 && t.shape.back() > 1 ? LossKind::kCrossEntropy : LossKind::kMse;
}

Graph training_graph(const Graph& forward, const TrainingOptions& options) {
  using training::Trained;
  if (options.steps < 1)
    throw GraphError(fmt::format("training: steps must be at least 1, not {}", options.steps));
  if (forward.outputs().empty()) throw GraphError("training: the graph has no output");
  const TensorType out = forward.value(forward.outputs().front()).type;
  if (!is_floating(out.dtype))
    throw GraphError(fmt::format("training: the prediction %{} is {}: it must be floating",
                                 forward.value(forward.outputs().front()).name,
                                 dtype_name(out.dtype)));
  const std::vector<ValueId> trained = trainable_params(forward);
  if (trained.empty()) throw GraphError("training: the graph has no floating parameter to train");
  const LossKind loss = resolve_loss(forward, options.loss);
  if (loss == LossKind::kCrossEntropy && (out.shape.empty() || out.shape.back() < 1))
    throw GraphError(
        fmt::format("training: cross-entropy needs a class dim; the prediction is {}", out.str()));

  const std::vector<ValueId> buffers = training::buffers_of(forward, trained);
  const Graph lg = training::loss_graph(forward, trained, buffers, loss);
  const auto data = static_cast<std::ptrdiff_t>(forward.inputs().size() + 1);  // and the target
  const std::vector<ValueId> wrt(
      lg.inputs().begin() + data,
      lg.inputs().begin() + data + static_cast<std::ptrdiff_t>(trained.size()));
  const std::vector<ValueId> buffer_inputs(
      lg.inputs().end() - static_cast<std::ptrdiff_t>(buffers.size()), lg.inputs().end());
  // Outputs: the loss, the buffers' updates, then the gradients.
  Graph joint = joint_graph(lg, wrt);
  if (options.recompute) joint = recompute_cheap(joint, lg.nodes().size());

  Graph g(forward.name() + ".train");
  g.set_base_dir(forward.base_dir());
  g.set_source_file(forward.source_file());
  std::vector<ValueId> leaves(lg.values().size(), -1);
  for (ValueId v : lg.inputs()) leaves[v] = copy_leaf(g, lg, v, false);
  for (ValueId v : lg.params()) leaves[v] = copy_leaf(g, lg, v, false);
  const std::vector<std::string> states = training::state_names(options.optimizer);
  std::vector<Trained> params;
  for (ValueId v : wrt) {
    Trained p{lg.value(v).name, leaves[v], {}};
    for (const std::string& s : states)
      p.state.push_back(g.add_input(p.name + "." + s, lg.value(v).type, {"zeros", {}}));
    params.push_back(std::move(p));
  }
  std::vector<ValueId> buffer_now;
  for (ValueId v : buffer_inputs) buffer_now.push_back(leaves[v]);

  std::vector<ValueId> losses, first, last;
  const size_t nb = buffers.size();
  for (int step = 1; step <= options.steps; ++step) {
    std::vector<ValueId> map = leaves;
    for (size_t k = 0; k < wrt.size(); ++k) map[wrt[k]] = params[k].value;
    for (size_t k = 0; k < nb; ++k) map[buffer_inputs[k]] = buffer_now[k];
    training::copy_nodes(g, joint, map, step == 1 ? "" : fmt::format("s{}.", step));
    const ValueId l = map[joint.outputs()[0]];
    g.rename_value(l, fmt::format("loss.{}", step));
    losses.push_back(l);
    for (size_t k = 0; k < nb; ++k) buffer_now[k] = map[joint.outputs()[1 + k]];
    const bool kept = step == 1 || step == options.steps;
    std::vector<ValueId> grads, updated;
    GradientSet backward{l, {}, {}};
    for (size_t k = 0; k < params.size(); ++k) {
      ValueId grad = map[joint.outputs()[1 + nb + k]];
      backward.wrt.push_back(params[k].value);
      backward.grads.push_back(grad);
      training::add_update(g, options.optimizer, step, grad, params[k]);
      if (!kept) continue;
      g.rename_value(grad, fmt::format("grad.{}.{}", step, params[k].name));
      g.rename_value(params[k].value, fmt::format("param.{}.{}", step, params[k].name));
      grads.push_back(grad);
      updated.push_back(params[k].value);
    }
    g.add_gradients(std::move(backward));
    if (!kept) continue;
    for (size_t k = 0; k < nb; ++k) {
      g.rename_value(buffer_now[k],
                     fmt::format("buffer.{}.{}", step, lg.value(buffer_inputs[k]).name));
      updated.push_back(buffer_now[k]);
    }
    std::vector<ValueId>& into = step == 1 ? first : last;
    into = grads;
    into.insert(into.end(), updated.begin(), updated.end());
  }
  std::vector<ValueId> outputs = losses;
  outputs.insert(outputs.end(), first.begin(), first.end());
  if (options.steps > 1) outputs.insert(outputs.end(), last.begin(), last.end());
  g.set_outputs(outputs);
  verify(g);
  return g;
}

}  // namespace crucible
