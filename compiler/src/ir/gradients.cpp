// Gradient sets (see crucible/ir/gradients.h): a set's backward as the nodes its gradients need
// and its loss does not, and the checks that keep a set's ids meaningful in its graph.
#include "crucible/ir/gradients.h"

#include <fmt/format.h>

#include <algorithm>

#include "crucible/core/error.h"

namespace crucible {

namespace {

bool is_value(const Graph& g, ValueId id) {
  return id >= 0 && static_cast<size_t>(id) < g.values().size();
}

}  // namespace

std::vector<bool> nodes_reaching(const Graph& g, const std::vector<ValueId>& roots) {
  std::vector<bool> in(g.nodes().size(), false);
  std::vector<ValueId> stack = roots;
  while (!stack.empty()) {
    const Value& v = g.value(stack.back());
    stack.pop_back();
    if (v.kind != ValueKind::kNode || in[static_cast<size_t>(v.node)]) continue;
    in[static_cast<size_t>(v.node)] = true;
    for (ValueId o : g.nodes()[static_cast<size_t>(v.node)].operands) stack.push_back(o);
  }
  return in;
}

std::vector<bool> live_nodes(const Graph& g) { return nodes_reaching(g, g.outputs()); }

std::vector<bool> outputs_after_an_update(const Graph& g) {
  const size_t n = g.nodes().size();
  // Nodes that read, through their operands, one of `values` (marked in `seed`).
  const auto downstream = [&](const std::vector<bool>& seed) {
    std::vector<bool> out(n, false), value_in(seed);
    for (size_t i = 0; i < n; ++i) {  // nodes are in definition order
      const Node& node = g.nodes()[i];
      out[i] = std::any_of(node.operands.begin(), node.operands.end(),
                           [&](ValueId o) { return value_in[static_cast<size_t>(o)]; });
      if (out[i]) value_in[static_cast<size_t>(node.output)] = true;
    }
    return out;
  };
  std::vector<bool> is_grad(g.values().size(), false);
  for (const GradientSet& set : g.gradients()) {
    for (ValueId grad : set.grads) is_grad[static_cast<size_t>(grad)] = true;
  }
  const std::vector<bool> after_grad = downstream(is_grad);
  // A later step's forward: the nodes of a set's forward that read its parameters, where those
  // were moved by a gradient (the parameter's own update is not one of them).
  std::vector<bool> later(g.values().size(), false);
  for (const GradientSet& set : g.gradients()) {
    std::vector<bool> moved(g.values().size(), false);
    for (ValueId w : set.wrt) {
      const Value& v = g.value(w);
      moved[static_cast<size_t>(w)] =
          v.kind == ValueKind::kNode && after_grad[static_cast<size_t>(v.node)];
    }
    if (std::find(moved.begin(), moved.end(), true) == moved.end()) continue;
    const std::vector<bool> forward = nodes_reaching(g, {set.loss}), reads = downstream(moved);
    for (size_t i = 0; i < n; ++i) {
      if (forward[i] && reads[i]) later[static_cast<size_t>(g.nodes()[i].output)] = true;
    }
  }
  const std::vector<bool> tainted = downstream(later);
  std::vector<bool> out;
  for (ValueId o : g.outputs()) {
    const Value& v = g.value(o);
    out.push_back(v.kind == ValueKind::kNode &&
                  (later[static_cast<size_t>(o)] || tainted[static_cast<size_t>(v.node)]));
  }
  return out;
}

std::vector<bool> backward_nodes(const Graph& g, const GradientSet& set) {
  std::vector<bool> out = nodes_reaching(g, set.grads);
  const std::vector<bool> forward = nodes_reaching(g, {set.loss});
  for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] && !forward[i];
  return out;
}

bool backward_is_sealed(const Graph& g, const GradientSet& set, const std::vector<bool>& backward) {
  std::vector<bool> is_grad(g.values().size(), false);
  for (ValueId grad : set.grads) is_grad[static_cast<size_t>(grad)] = true;
  const auto inside = [&](ValueId v) {
    const Value& value = g.value(v);
    return value.kind == ValueKind::kNode && backward[static_cast<size_t>(value.node)] &&
           !is_grad[static_cast<size_t>(v)];
  };
  const std::vector<bool> live = live_nodes(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (backward[i] || !live[i]) continue;
    for (ValueId o : g.nodes()[i].operands)
      if (inside(o)) return false;
  }
  for (ValueId o : g.outputs())
    if (inside(o)) return false;
  return true;
}

void verify_gradients(const Graph& g) {
  for (const GradientSet& set : g.gradients()) {
    if (!is_value(g, set.loss)) throw GraphError("gradients: the loss is not a value of the graph");
    const std::string& loss = g.value(set.loss).name;
    const auto fail = [&](const std::string& what) {
      throw GraphError(fmt::format("gradients of %{}: {}", loss, what));
    };
    if (!is_floating(g.value(set.loss).type.dtype)) fail("the loss is not floating");
    if (set.wrt.empty() || set.wrt.size() != set.grads.size())
      fail(fmt::format("{} values but {} gradients", set.wrt.size(), set.grads.size()));
    const std::vector<bool> forward = nodes_reaching(g, {set.loss});
    for (size_t i = 0; i < set.wrt.size(); ++i) {
      if (!is_value(g, set.wrt[i]) || !is_value(g, set.grads[i]))
        fail(fmt::format("pair {} is not a value of the graph", i));
      const Value& wrt = g.value(set.wrt[i]);
      const Value& grad = g.value(set.grads[i]);
      if (!is_floating(wrt.type.dtype)) fail(fmt::format("%{} is not floating", wrt.name));
      if (grad.type != wrt.type)
        fail(fmt::format("%{} is {} but its gradient %{} is {}", wrt.name, wrt.type.str(),
                         grad.name, grad.type.str()));
      if (grad.kind != ValueKind::kNode)
        fail(fmt::format("the gradient %{} is not a node's result", grad.name));
      if (forward[static_cast<size_t>(grad.node)])
        fail(fmt::format("the loss depends on the gradient %{}", grad.name));
    }
  }
}

}  // namespace crucible
