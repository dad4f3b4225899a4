// Greedy fusion of the nodes lower() claimed into kernel groups: one named predicate per rule
// (vertical and horizontal, pointwise and row), applied in topological order by fuse().
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "crucible/core/error.h"
#include "passes.h"

namespace crucible::codegen {

namespace {

Shape split_outer(const Shape& s, size_t inner_rank) {
  return Shape(s.begin(), s.end() - inner_rank);
}
Shape split_inner(const Shape& s, size_t inner_rank) {
  return Shape(s.end() - inner_rank, s.end());
}

Shape concat(const Shape& a, const Shape& b) {
  Shape out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Does `shape` name the per-row scalars of a group with these outer dims (keepdim or not)?
bool is_row_scalar(const Shape& shape, const Shape& outer, const Shape& inner) {
  if (shape == outer) return true;
  return shape == concat(outer, Shape(inner.size(), 1));
}

// What the fusion rules consult about the graph; built once per fuse().
struct FusionContext {
  const Graph& g;
  const LoopProgram& lp;
  const std::set<ValueId>& keep;
  std::vector<std::vector<int>> readers;  // per value
  std::set<ValueId> graph_outputs;

  // The group computing `v`, or -1 for inputs, parameters and inlined constants.
  int group_of_value(ValueId v) const {
    const Value& val = g.value(v);
    return val.kind == ValueKind::kNode ? lp.group_of[val.node] : -1;
  }
  // Is `v` needed outside group `grp` apart from by node `joining`?
  bool read_outside(const Group& grp, ValueId v, int joining) const {
    if (graph_outputs.contains(v) || keep.contains(v)) return true;
    for (int r : readers[v]) {
      if (r != joining && std::find(grp.nodes.begin(), grp.nodes.end(), r) == grp.nodes.end())
        return true;
    }
    return false;
  }
};

// The iteration space a reduction node opens: its operand's shape split into rows x reduced dims.
void reduction_space(const Graph& g, const Node& n, Shape& outer, Shape& inner) {
  const Shape& x = g.value(n.operands[0]).type.shape;
  const size_t k = n.attrs.get_ints("dims").size();
  outer = split_outer(x, k);
  inner = split_inner(x, k);
}

// A pointwise group may widen to a larger shape its values broadcast to, recomputing them per
// element, when none of them is needed outside the group (so no value is ever stored from a
// broadcast iteration): the tutorial's neg on [1,8] fuses into maximum over [8390,8].
bool can_widen(const FusionContext& cx, const Group& grp, int joining, const Shape& to) {
  try {
    if (broadcast_shapes(grp.outer, to) != to) return false;
  } catch (const Error&) {
    return false;
  }
  for (int m : grp.nodes) {
    if (cx.read_outside(grp, cx.g.nodes()[m].output, joining)) return false;
  }
  return true;
}

// Pointwise into a pointwise group: vertical (it reads the group) or horizontal (it shares the
// group's iteration space), over equal shapes or by widening the group.
bool can_fuse_pointwise(const FusionContext& cx, const Group& grp, int node) {
  const Shape& out = cx.g.value(cx.g.nodes()[node].output).type.shape;
  return out == grp.outer || can_widen(cx, grp, node, out);
}

// Pointwise into a row group (one with a reduction): either over the full rows (outer x inner),
// reading the group's per-row values in keepdim form only, since an [R] value would broadcast
// along the columns; or over the per-row scalars (a softmax's division by the row sum, say).
bool can_fuse_into_rows(const FusionContext& cx, const Group& grp, int gi, int node) {
  const Node& n = cx.g.nodes()[node];
  const Shape& out = cx.g.value(n.output).type.shape;
  if (out != concat(grp.outer, grp.inner)) return is_row_scalar(out, grp.outer, grp.inner);
  const Shape keepdim = concat(grp.outer, Shape(grp.inner.size(), 1));
  for (ValueId o : n.operands) {
    const Shape& s = cx.g.value(o).type.shape;
    if (cx.group_of_value(o) == gi && is_row_scalar(s, grp.outer, grp.inner) && s != keepdim)
      return false;
  }
  return true;
}

// A reduction into a pointwise group over exactly its operand's elements turns the group into a
// row group. A widened member (a broadcast value recomputed per element, say a causal mask) has no
// place in a row group, whose smaller values are per-row, so such a group stays pointwise.
bool can_fuse_reduction_into_pointwise(const FusionContext& cx, const Group& grp, int node) {
  const Shape& x = cx.g.value(cx.g.nodes()[node].operands[0]).type.shape;
  if (grp.outer != x) return false;
  for (int m : grp.nodes) {
    if (cx.g.value(cx.g.nodes()[m].output).type.shape != x) return false;
  }
  return true;
}

// A reduction into a row group over the same rows and reduced dims (horizontal: a layer_norm's
// mean and variance, or vertical: a softmax's max then sum).
bool can_fuse_reduction_into_rows(const FusionContext& cx, const Group& grp, int node) {
  Shape outer, inner;
  reduction_space(cx.g, cx.g.nodes()[node], outer, inner);
  return grp.outer == outer && grp.inner == inner;
}

// Results this small (a batch norm's per-channel scale and shift) cost nothing to keep alive, so
// they may join a kernel however far back it runs.
constexpr double kFreeToKeepBytes = 64.0 * 1024;

// Whether node `node` may run where kernel group `gi` runs: just before the next group, whose
// first node came after every node of `gi`. A node computed that far back keeps its result (when
// a later step reads it) alive from there. A training step puts each recomputed value just before
// the backward reads it; joined to the forward kernels sharing its operands, every such value was
// alive at once when the backward began (densenet121 at batch 4: 660 MB of tensors at the peak,
// eager 473). Inductor refuses fusions of nodes over 64 apart for the same reason. The distance
// only grows towards older groups, so fuse() stops its search at the first group too far.
bool near_enough(const FusionContext& cx, int gi, int node, size_t max_distance) {
  if (gi + 1 == static_cast<int>(cx.lp.groups.size())) return true;
  if (cx.g.value(cx.g.nodes()[node].output).type.bytes() < kFreeToKeepBytes) return true;
  return static_cast<size_t>(node - cx.lp.groups[gi + 1].nodes.front()) <= max_distance;
}

// Whether node `node` (pointwise or reduction) may join kernel group `gi`.
bool can_fuse(const FusionContext& cx, int gi, int node, size_t cap) {
  const Group& grp = cx.lp.groups[gi];
  if (grp.kind != Group::Kind::kKernel || grp.nodes.size() >= cap) return false;
  if (cx.lp.classes[node] == NodeClass::kPointwise) {
    return grp.has_reduction ? can_fuse_into_rows(cx, grp, gi, node)
                             : can_fuse_pointwise(cx, grp, node);
  }
  return grp.has_reduction ? can_fuse_reduction_into_rows(cx, grp, node)
                           : can_fuse_reduction_into_pointwise(cx, grp, node);
}

// Adds `node` to kernel group `grp` (a new one when it is empty), growing its iteration space
// where the node needs: a pointwise group widens to the node's shape, a reduction makes the group
// a row group.
void join(const Graph& g, Group& grp, const Node& n, NodeClass c) {
  if (c == NodeClass::kPointwise) {
    if (grp.nodes.empty() || !grp.has_reduction)
      grp.outer = grp.nodes.empty() ? g.value(n.output).type.shape
                                    : broadcast_shapes(grp.outer, g.value(n.output).type.shape);
  } else if (!grp.has_reduction) {
    reduction_space(g, n, grp.outer, grp.inner);
    grp.has_reduction = true;
  }
}

// Kernel names follow Inductor: cpp_fused_<sorted distinct op names>_<n>.
void name_groups(const Graph& g, LoopProgram& lp) {
  const auto& nodes = g.nodes();
  int kernel_index = 0;
  for (Group& grp : lp.groups) {
    if (grp.kind == Group::Kind::kKernel) {
      std::set<std::string> ops;
      for (int ni : grp.nodes) ops.insert(nodes[ni].op);
      std::string name = "cpp_fused";
      for (const auto& op : ops) name += "_" + op;
      grp.name = fmt::format("{}_{}", name, kernel_index++);
    } else if (grp.kind == Group::Kind::kPackedLinear) {
      grp.name = "extern::packed_linear";
      if (grp.nodes.size() > 1) grp.name += "_" + nodes[grp.nodes[1]].op;
    } else if (grp.kind == Group::Kind::kPackedConv) {
      grp.name = packed_conv_name(g, grp);
    } else {
      grp.name = fmt::format("{}::{}", grp.kind == Group::Kind::kExtern ? "extern" : "view",
                             nodes[grp.nodes[0]].op);
    }
  }
}

Group::Kind own_group_kind(NodeClass c) {
  switch (c) {
    case NodeClass::kPackedLinear:
      return Group::Kind::kPackedLinear;
    case NodeClass::kPackedConv:
      return Group::Kind::kPackedConv;
    case NodeClass::kView:
      return Group::Kind::kView;
    default:
      return Group::Kind::kExtern;
  }
}

}  // namespace

void fuse(const Graph& g, LoopProgram& lp, const CodegenConfig& config,
          const std::set<ValueId>& keep) {
  const auto& nodes = g.nodes();
  lp.group_of.assign(nodes.size(), -1);
  const FusionContext cx{g, lp, keep, readers_of(g), {g.outputs().begin(), g.outputs().end()}};
  auto add_to = [&](int gi, int i) {
    lp.groups[gi].nodes.push_back(i);
    lp.group_of[i] = gi;
  };
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const NodeClass c = lp.classes[i];
    if (c == NodeClass::kConstant) continue;  // inlined into every use
    if (c == NodeClass::kAbsorbed) {          // runs inside its linear's or conv's call
      add_to(lp.group_of[lp.absorbed_by[i]], i);
      continue;
    }
    if (c != NodeClass::kPointwise && c != NodeClass::kReduction) {  // a step of its own
      lp.groups.emplace_back().kind = own_group_kind(c);
      add_to(static_cast<int>(lp.groups.size()) - 1, i);
      continue;
    }
    // The earliest group this node may join: after every group producing one of its operands.
    int min_group = 0;
    for (ValueId o : nodes[i].operands) min_group = std::max(min_group, cx.group_of_value(o));
    int chosen = -1;
    for (int gi = static_cast<int>(lp.groups.size()) - 1; config.fusion && gi >= min_group; --gi) {
      if (!near_enough(cx, gi, i, config.max_fusion_distance)) break;
      if (can_fuse(cx, gi, i, config.max_fusion_size)) {
        chosen = gi;
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(lp.groups.size());
      lp.groups.push_back(Group{});
    }
    join(g, lp.groups[chosen], nodes[i], c);
    add_to(chosen, i);
  }
  name_groups(g, lp);
}

std::string print_loop_program(const Graph& g, const LoopProgram& lp) {
  static const char* kClass[] = {"pointwise", "reduction", "view",     "constant",
                                 "extern",    "packed",    "epilogue", "packed"};
  std::string out;
  if (lp.groups.empty()) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      out += fmt::format("node {:>3} %{} = {} : {} {}\n", i, g.value(n.output).name, n.op,
                         kClass[static_cast<int>(lp.classes[i])], g.value(n.output).type.str());
    }
    return out;
  }
  for (const Group& grp : lp.groups) {
    out += fmt::format("{}", grp.name);
    if (grp.kind == Group::Kind::kKernel) {
      out += fmt::format(" over {}", shape_str(grp.outer));
      if (grp.has_reduction) out += fmt::format(" x reduce {}", shape_str(grp.inner));
    }
    out += "\n";
    for (int ni : grp.nodes) {
      const Node& n = g.nodes()[ni];
      out += fmt::format("  %{} = {} : {} {}\n", g.value(n.output).name, n.op,
                         kClass[static_cast<int>(lp.classes[ni])], g.value(n.output).type.str());
    }
  }
  return out;
}

}  // namespace crucible::codegen
