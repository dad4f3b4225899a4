// Which conv2d nodes run as packed convolutions, and which of the nodes after them (batch_norm,
// residual add, an activation) each one absorbs: the pattern rules decompose() and lower() share.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "passes.h"

namespace crucible::codegen {

namespace {

bool is_param(const Graph& g, ValueId v) { return g.value(v).kind == ValueKind::kParam; }

bool is_output(const Graph& g, ValueId v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// The one node reading `v`, when the chain may run through it: `v` has no other reader and is not
// a graph output (either would need `v` itself, which the packed call never materializes).
int sole_consumer(const Graph& g, ValueId v, const Consumers& consumers) {
  const std::vector<int>& cs = consumers[v];
  return cs.size() == 1 && !is_output(g, v) ? cs[0] : -1;
}

// relu, the mobile activations (sigmoid, silu, hardsigmoid, hardswish, each one op), or clamp with
// both bounds finite and ordered (oneDNN's clip and our epilogue loop take a closed interval);
// other clamps stay pointwise kernels.
bool is_activation(const Graph& g, const Node& n) {
  if (g.value(n.output).type.dtype != DType::kF32) return false;
  if (is_fused_activation_op(n.op)) return true;
  if (n.op != "clamp") return false;
  const std::optional<double> lo = n.attrs.get_optional_float("min"),
                              hi = n.attrs.get_optional_float("max");
  return lo && hi && std::isfinite(*lo) && std::isfinite(*hi) && *lo <= *hi;
}

// silu as exporters write it, mul(v, sigmoid(v)) in either operand order: v read by exactly that
// sigmoid and that mul, the sigmoid's result by the mul alone. Returns the sigmoid, or -1.
int silu_sigmoid(const Graph& g, ValueId v, const Consumers& consumers) {
  const std::vector<int>& cs = consumers[v];
  if (cs.size() != 2 || cs[0] < 0 || cs[1] < 0 || is_output(g, v)) return -1;
  for (int k = 0; k < 2; ++k) {
    const Node& sig = g.nodes()[cs[k]];
    const Node& mul = g.nodes()[cs[1 - k]];
    if (sig.op != "sigmoid" || mul.op != "mul" ||
        sole_consumer(g, sig.output, consumers) != cs[1 - k])
      continue;
    const bool operands = (mul.operands[0] == v && mul.operands[1] == sig.output) ||
                          (mul.operands[1] == v && mul.operands[0] == sig.output);
    if (operands && g.value(mul.output).type == g.value(v).type &&
        g.value(v).type.dtype == DType::kF32)
      return cs[k];
  }
  return -1;
}

}  // namespace

Consumers consumers_of(const Graph& g, const std::set<ValueId>& keep) {
  Consumers consumers = readers_of(g);
  for (ValueId v : keep) consumers[v].push_back(-1);
  return consumers;
}

bool packs_conv2d(const Graph& g, const Node& n) {
  if (n.op != "conv2d") return false;
  const TensorType& x = g.value(n.operands[0]).type;
  const Value& w = g.value(n.operands[1]);
  if (x.dtype != DType::kF32 || w.kind != ValueKind::kParam || x.shape.size() != 4) return false;
  if (n.operands.size() > 2 && !is_param(g, n.operands[2])) return false;
  // Empty problems stay with the eager kernel, which defines them (the bias broadcast, or zeros).
  return x.numel() > 0 && w.type.numel() > 0 && g.value(n.output).type.numel() > 0;
}

bool folds_into_conv(const Graph& g, const Node& bn, const Consumers& consumers) {
  if (bn.op != "batch_norm" || g.value(bn.output).type.dtype != DType::kF32) return false;
  for (size_t k = 1; k < 5; ++k) {
    if (!is_param(g, bn.operands[k])) return false;  // folded once, at compile time
  }
  const Value& x = g.value(bn.operands[0]);
  if (x.kind != ValueKind::kNode || !packs_conv2d(g, g.nodes()[x.node])) return false;
  return sole_consumer(g, bn.operands[0], consumers) >= 0;
}

ConvChain match_conv_chain(const Graph& g, int conv, const Consumers& consumers) {
  const auto& nodes = g.nodes();
  ConvChain chain;
  ValueId v = nodes[conv].output;
  int next = sole_consumer(g, v, consumers);
  if (next >= 0 && folds_into_conv(g, nodes[next], consumers)) {
    chain.bn = next;
    v = nodes[next].output;
    next = sole_consumer(g, v, consumers);
  }
  if (next >= 0 && nodes[next].op == "add") {
    // The residual must exist when the packed call runs, at the conv's place in the schedule: an
    // input, a parameter or a node before the conv. Same shape, no broadcasting either way.
    const Node& add = nodes[next];
    const ValueId other = add.operands[0] == v ? add.operands[1] : add.operands[0];
    const Value& r = g.value(other);
    const bool earlier = r.kind != ValueKind::kNode || r.node < conv;
    if (other != v && earlier && r.type == g.value(v).type &&
        g.value(add.output).type == g.value(v).type) {
      chain.add = next;
      chain.residual = other;
      v = add.output;
      next = sole_consumer(g, v, consumers);
    }
  }
  if (next >= 0 && is_activation(g, nodes[next])) {
    chain.act = next;
  } else if (const int sig = silu_sigmoid(g, v, consumers); sig >= 0) {
    chain.sigmoid = sig;
    chain.act = sole_consumer(g, nodes[sig].output, consumers);
  }
  return chain;
}

bool is_fused_activation_op(const std::string& op) {
  return op == "relu" || op == "sigmoid" || op == "silu" || op == "hardsigmoid" ||
         op == "hardswish";
}

std::string packed_conv_name(const Graph& g, const Group& grp) {
  std::string name = "extern::packed_conv2d";
  for (size_t k = 1; k < grp.nodes.size(); ++k) {
    const std::string& op = g.nodes()[grp.nodes[k]].op;
    if (op == "sigmoid" && k + 1 < grp.nodes.size() && g.nodes()[grp.nodes[k + 1]].op == "mul") {
      name += "_silu";  // with the mul after it
      ++k;
      continue;
    }
    name += "_" + (op == "batch_norm" ? std::string("bn") : op);
  }
  return name;
}

}  // namespace crucible::codegen
