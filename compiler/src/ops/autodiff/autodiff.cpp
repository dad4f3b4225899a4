// The joint graph (see crucible/ops/autodiff.h): which values need a gradient, the seed, every
// node's rule in reverse order with contributions to one value added, and the builder's helpers.
#include "crucible/ops/autodiff.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "autodiff/grad_builder.h"
#include "crucible/core/error.h"
#include "graph_copy.h"

namespace crucible {

namespace autodiff {

ValueId GradBuilder::op(const std::string& name, std::vector<ValueId> operands, Attrs attrs) {
  // Named after the forward value, so a backward node in a repro says whose gradient it computes.
  const std::string mine = fmt::format("{}.bwd{}", g_.value(node_.output).name, made_++);
  return g_.add_node(name, std::move(operands), std::move(attrs), free_name(g_, mine));
}

ValueId filled(Graph& g, const Shape& shape, double value, DType dtype) {
  return g.add_node("full", {}, {{"shape", shape}, {"value", value}, {"dtype", dtype}});
}

int64_t wrap_dim(int64_t d, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  return (d % r + r) % r;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

ValueId GradBuilder::scalar(double value, DType dtype) {
  return autodiff::filled(g_, {}, value, dtype);
}

ValueId GradBuilder::as_number(ValueId mask, ValueId like) {
  return op("cast", {mask}, {{"dtype", type(like).dtype}});
}

ValueId GradBuilder::masked(ValueId mask, ValueId g) {
  return op("where", {mask, g, scalar_like(0.0, g)});
}

ValueId GradBuilder::sum_to(ValueId g, const Shape& shape) {
  const Shape from = this->shape(g);
  if (from == shape) return g;
  const size_t lead = from.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < from.size(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  }
  ValueId s = g;
  if (!dims.empty()) s = op("sum", {g}, {{"dims", dims}, {"keepdim", true}});
  return op("reshape", {s}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

ValueId GradBuilder::expand_over(ValueId g, const Shape& shape, const std::vector<int64_t>& dims,
                                 bool keepdim) {
  ValueId kept = g;
  if (!keepdim) {
    Shape with_ones = shape;
    for (int64_t d : dims) with_ones[d] = 1;
    kept = op("reshape", {g}, {{"shape", with_ones}});
  }
  return op("expand", {kept}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

std::vector<int64_t> reduced_dims(const Attrs& attrs, size_t rank) {
  std::vector<int64_t> dims;
  if (attrs.has("dims")) dims = attrs.get_ints("dims");
  if (dims.empty()) {
    dims.resize(rank);
    std::iota(dims.begin(), dims.end(), 0);
  }
  for (int64_t& d : dims) d = d < 0 ? d + static_cast<int64_t>(rank) : d;
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

namespace {

const GradTable& table() {
  static const GradTable t = [] {
    GradTable out;
    add_elementwise_grads(out);
    add_reduction_grads(out);
    add_linalg_grads(out);
    add_shape_grads(out);
    add_index_grads(out);
    add_vision_grads(out);
    return out;
  }();
  return t;
}

// Per value, whether it depends on a value in `wrt` (so its gradient is needed).
std::vector<bool> needing_grad(const Graph& g, std::span<const ValueId> wrt) {
  std::vector<bool> needs(g.values().size(), false);
  for (ValueId v : wrt) needs[v] = true;
  for (const Node& n : g.nodes()) {
    for (ValueId o : n.operands) needs[n.output] = needs[n.output] || needs[o];
  }
  return needs;
}

std::string node_name(const Graph& g, const Node& n) {
  return fmt::format("{}%{} = {}(...)", g.where(n.output), g.value(n.output).name, n.op);
}

}  // namespace

}  // namespace autodiff

bool differentiable(const std::string& op) { return autodiff::table().contains(op); }

std::vector<std::string> differentiable_ops() {
  std::vector<std::string> out;
  for (const auto& [name, rule] : autodiff::table()) out.push_back(name);
  return out;
}

Graph joint_graph(const Graph& forward, std::span<const ValueId> wrt) {
  using autodiff::GradBuilder;
  if (forward.outputs().empty()) throw GraphError("autodiff: the graph has no output (the loss)");
  for (ValueId v : wrt) {
    if (v < 0 || static_cast<size_t>(v) >= forward.values().size())
      throw GraphError(fmt::format("autodiff: value id {} is not in the graph", v));
    if (!is_floating(forward.value(v).type.dtype))
      throw GraphError(fmt::format("autodiff: %{} is {}: only floating values have gradients",
                                   forward.value(v).name, dtype_name(forward.value(v).type.dtype)));
  }
  Graph g = forward;
  const std::vector<bool> needs = autodiff::needing_grad(g, wrt);
  std::vector<ValueId> grad(g.values().size(), -1);
  const ValueId loss = g.outputs().front();
  const TensorType lt = g.value(loss).type;  // a copy: g grows below
  if (!is_floating(lt.dtype))
    throw GraphError(fmt::format("autodiff: the loss %{} is {}: it must be floating",
                                 g.value(loss).name, dtype_name(lt.dtype)));
  grad[loss] = autodiff::filled(g, lt.shape, 1.0, lt.dtype);
  const size_t forward_nodes = forward.nodes().size();
  for (size_t i = forward_nodes; i-- > 0;) {
    const Node n = g.nodes()[i];  // a copy: the rule adds nodes to g
    if (grad[n.output] < 0 || !needs[n.output]) continue;
    const auto rule = autodiff::table().find(n.op);
    if (rule == autodiff::table().end())
      throw GraphError(fmt::format("autodiff: no gradient rule for op '{}' ({})", n.op,
                                   autodiff::node_name(g, n)));
    std::vector<bool> wants;
    for (ValueId o : n.operands) wants.push_back(needs[o] && is_floating(g.value(o).type.dtype));
    GradBuilder b(g, n, grad[n.output], wants);
    const std::vector<ValueId> got = rule->second(b);
    for (size_t k = 0; k < n.operands.size() && k < got.size(); ++k) {
      if (got[k] < 0 || !wants[k]) continue;
      ValueId& into = grad[n.operands[k]];
      into = into < 0 ? got[k] : g.add_node("add", {into, got[k]});
    }
  }
  std::vector<ValueId> outputs = forward.outputs();
  std::set<ValueId> named;
  for (ValueId v : wrt) {
    ValueId d = grad[v];
    const TensorType t = g.value(v).type;
    if (d < 0) {
      d = autodiff::filled(g, t.shape, 0.0, t.dtype);
    } else if (static_cast<size_t>(d) < forward.values().size() || named.contains(d)) {
      // A forward value (the loss itself, say), or a gradient two values share (add's), is
      // returned through a copy of its own name.
      d = g.add_node("reshape", {d},
                     {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())}});
    }
    const std::string name = "grad." + forward.value(v).name;
    if (!g.find_value(name)) g.rename_value(d, name);
    named.insert(d);
    outputs.push_back(d);
  }
  g.set_outputs(outputs);
  return g;
}

}  // namespace crucible
