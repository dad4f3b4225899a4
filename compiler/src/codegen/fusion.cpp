// Lowering to the loop IR (which nodes codegen claims, and as what) and greedy fusion of claimed
// nodes into kernels: the claiming/compiling split of an execution provider, in one pass each.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "crucible/core/error.h"
#include "passes.h"

namespace crucible::codegen {

namespace {

const std::set<std::string> kFloatUnary = {"exp",  "log",     "sqrt",       "rsqrt", "sin", "cos",
                                           "tanh", "sigmoid", "reciprocal", "erf",   "gelu"};
const std::set<std::string> kArith = {"add", "sub", "mul", "maximum", "minimum"};
const std::set<std::string> kCompare = {"eq", "ne", "lt", "le", "gt", "ge"};
const std::set<std::string> kViews = {"reshape", "permute", "transpose", "expand",
                                      "slice",   "squeeze", "unsqueeze"};
const std::set<std::string> kReductions = {"sum", "mean", "amax", "amin"};

// Pointwise ops whose generated code reproduces eager's semantics for these dtypes exactly.
bool claims_pointwise(const Graph& g, const Node& n) {
  const DType out = g.value(n.output).type.dtype;
  auto in = [&](size_t i) { return g.value(n.operands[i]).type.dtype; };
  if (n.op == "neg" || n.op == "abs" || n.op == "relu") return out != DType::kBool;
  if (kFloatUnary.contains(n.op)) return is_floating(in(0));
  if (kArith.contains(n.op)) return out != DType::kBool;
  if (n.op == "div" || n.op == "pow" || n.op == "clamp") return is_floating(out);
  if (kCompare.contains(n.op) || n.op == "where" || n.op == "cast") return true;
  if (n.op == "cat") return n.operands.size() == 1;  // a copy; several operands run as extern
  return false;
}

// A reduction codegen fuses: floating, over the trailing dims, leaving enough rows to parallelize.
bool claims_reduction(const Graph& g, const Node& n) {
  if (!kReductions.contains(n.op)) return false;
  const TensorType& x = g.value(n.operands[0]).type;
  if (!is_floating(x.dtype) || x.shape.empty()) return false;
  std::vector<int64_t> dims =
      n.attrs.has("dims") ? n.attrs.get_ints("dims") : std::vector<int64_t>{};
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (dims.empty())
    return false;  // a full reduction has one row: eager's parallel kernel is better
  std::vector<int64_t> norm;
  for (int64_t d : dims) norm.push_back(d < 0 ? d + rank : d);
  std::sort(norm.begin(), norm.end());
  for (size_t i = 0; i < norm.size(); ++i) {
    if (norm[i] != rank - static_cast<int64_t>(norm.size()) + static_cast<int64_t>(i)) return false;
  }
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < rank - static_cast<int64_t>(norm.size()) ? rows : cols) *= x.shape[d];
  // Few rows leave threads idle on one long row: eager's parallel reduction is better, unless the
  // whole reduction is small enough to run serially anyway.
  return rows >= 16 || rows * cols <= 65536;
}

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

}  // namespace

LoopProgram lower(const Graph& g, const CodegenConfig& config, const std::set<ValueId>& keep) {
  LoopProgram lp;
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  for (const Node& n : g.nodes()) {
    NodeClass c = NodeClass::kExtern;
    if (n.op == "full" && !outputs.contains(n.output)) {
      c = NodeClass::kConstant;
    } else if (kViews.contains(n.op)) {
      c = NodeClass::kView;
    } else if (claims_pointwise(g, n)) {
      c = NodeClass::kPointwise;
    } else if (claims_reduction(g, n)) {
      c = NodeClass::kReduction;
    }
    lp.classes.push_back(c);
  }
  // Linear (and matmul) with a parameter weight: packed once into the GEMM library's layout, with a
  // lone activation consumer fused in as the GEMM's post-op.
  lp.absorbed_by.assign(g.nodes().size(), -1);
  const Consumers consumers = consumers_of(g);
  const std::set<std::string> kEpilogues = {"relu", "gelu", "sigmoid", "tanh"};
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != "linear" && n.op != "matmul") continue;
    const Value& x = g.value(n.operands[0]);
    const Value& w = g.value(n.operands[1]);
    const bool bias_ok = n.operands.size() < 3 || g.value(n.operands[2]).kind == ValueKind::kParam;
    if (x.type.dtype != DType::kF32 || w.kind != ValueKind::kParam || w.type.shape.size() != 2 ||
        !bias_ok || x.type.shape.size() < 2) {
      continue;
    }
    lp.classes[i] = NodeClass::kPackedLinear;
    const auto& cs = consumers[n.output];
    if (cs.size() == 1 && !outputs.contains(n.output) && kEpilogues.contains(g.nodes()[cs[0]].op) &&
        g.value(g.nodes()[cs[0]].output).type.dtype == DType::kF32) {
      lp.classes[cs[0]] = NodeClass::kAbsorbed;
      lp.absorbed_by[cs[0]] = static_cast<int>(i);
    }
  }
  // conv2d with a parameter weight: packed once, absorbing the batch norm, residual add and
  // activation after it (the rules are in conv_chain.cpp).
  const Consumers conv_consumers = consumers_of(g, keep);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!packs_conv2d(g, g.nodes()[i])) continue;
    lp.classes[i] = NodeClass::kPackedConv;
    const ConvChain chain = match_conv_chain(g, static_cast<int>(i), conv_consumers);
    for (int a : {chain.bn, chain.add, chain.act}) {
      if (a < 0) continue;
      lp.classes[a] = NodeClass::kAbsorbed;
      lp.absorbed_by[a] = static_cast<int>(i);
    }
  }
  // A view whose layout needs a copy (reshape of a non-viewable view) runs as an extern copy.
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (lp.classes[i] != NodeClass::kView) continue;
    ValueId base;
    Shape shape, strides;
    int64_t offset;
    if (!view_layout(g, static_cast<int>(i), lp.classes, base, shape, strides, offset)) {
      lp.classes[i] = NodeClass::kExtern;
    }
  }
  // A constant is inlined into the kernels that read it; one that a view, an extern call or a GEMM
  // reads must exist as a tensor, so it is made by the eager kernel instead.
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (lp.classes[i] != NodeClass::kConstant) continue;
    for (int c : consumers[g.nodes()[i].output]) {
      if (lp.classes[c] != NodeClass::kPointwise && lp.classes[c] != NodeClass::kReduction)
        lp.classes[i] = NodeClass::kExtern;
    }
  }
  return lp;
}

void fuse(const Graph& g, LoopProgram& lp, const CodegenConfig& config,
          const std::set<ValueId>& keep) {
  const bool fusion = config.fusion;
  const size_t cap = config.max_fusion_size;
  const auto& nodes = g.nodes();
  lp.group_of.assign(nodes.size(), -1);
  std::vector<int> producer_node(g.values().size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) producer_node[nodes[i].output] = static_cast<int>(i);
  std::vector<std::vector<int>> consumers(g.values().size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId o : nodes[i].operands) consumers[o].push_back(static_cast<int>(i));
  }
  const std::set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());
  // A pointwise group may widen to a larger shape its values broadcast to, recomputing them per
  // element, when none of them is needed outside the group (so no value is ever stored from a
  // broadcast iteration): the tutorial's neg on [1,8] fuses into maximum over [8390,8].
  auto can_widen = [&](const Group& grp, int joining, const Shape& to) {
    try {
      if (broadcast_shapes(grp.outer, to) != to) return false;
    } catch (const Error&) {
      return false;
    }
    for (int m : grp.nodes) {
      const ValueId v = nodes[m].output;
      if (graph_outputs.contains(v) || keep.contains(v)) return false;
      for (int c : consumers[v]) {
        if (c != joining && std::find(grp.nodes.begin(), grp.nodes.end(), c) == grp.nodes.end())
          return false;
      }
    }
    return true;
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const NodeClass c = lp.classes[i];
    if (c == NodeClass::kConstant) continue;  // inlined into every use
    if (c == NodeClass::kAbsorbed) {          // runs inside its linear's or conv's call
      const int owner = lp.group_of[lp.absorbed_by[i]];
      lp.groups[owner].nodes.push_back(static_cast<int>(i));
      lp.group_of[i] = owner;
      continue;
    }
    if (c == NodeClass::kPackedLinear || c == NodeClass::kPackedConv) {
      Group grp;
      grp.kind =
          c == NodeClass::kPackedLinear ? Group::Kind::kPackedLinear : Group::Kind::kPackedConv;
      grp.nodes = {static_cast<int>(i)};
      lp.group_of[i] = static_cast<int>(lp.groups.size());
      lp.groups.push_back(grp);
      continue;
    }
    if (c == NodeClass::kExtern || c == NodeClass::kView) {
      Group grp;
      grp.kind = c == NodeClass::kExtern ? Group::Kind::kExtern : Group::Kind::kView;
      grp.nodes = {static_cast<int>(i)};
      lp.group_of[i] = static_cast<int>(lp.groups.size());
      lp.groups.push_back(grp);
      continue;
    }
    // The earliest group this node may join: after every group producing one of its operands.
    int min_group = -1;
    for (ValueId o : n.operands) {
      const int p = producer_node[o];
      if (p >= 0 && lp.group_of[p] >= 0) min_group = std::max(min_group, lp.group_of[p]);
    }
    const TensorType& out = g.value(n.output).type;
    int chosen = -1;
    for (int gi = static_cast<int>(lp.groups.size()) - 1; fusion && gi >= std::max(min_group, 0);
         --gi) {
      Group& grp = lp.groups[gi];
      if (grp.kind != Group::Kind::kKernel || grp.nodes.size() >= cap) continue;
      bool ok = false;
      if (c == NodeClass::kPointwise) {
        if (!grp.has_reduction) {
          ok = out.shape == grp.outer;
          if (!ok && can_widen(grp, static_cast<int>(i), out.shape)) {
            grp.outer = out.shape;
            ok = true;
          }
        } else if (out.shape == concat(grp.outer, grp.inner)) {
          // A per-row value of this group read by a full-row node must be in keepdim form, so that
          // broadcasting maps it onto the rows (an [R] value would broadcast along the columns).
          const Shape keepdim = concat(grp.outer, Shape(grp.inner.size(), 1));
          ok = true;
          for (ValueId o : n.operands) {
            const int p = producer_node[o];
            if (p >= 0 && lp.group_of[p] == gi &&
                is_row_scalar(g.value(o).type.shape, grp.outer, grp.inner) &&
                g.value(o).type.shape != keepdim) {
              ok = false;
            }
          }
        } else {
          ok = is_row_scalar(out.shape, grp.outer, grp.inner);
        }
      } else {  // reduction over trailing dims
        const Shape& x = g.value(n.operands[0]).type.shape;
        const size_t k = n.attrs.get_ints("dims").size();
        const Shape outer = split_outer(x, k), inner = split_inner(x, k);
        if (!grp.has_reduction) {
          // Turns a pointwise group over exactly these elements into a row group. A widened
          // member (a broadcast value recomputed per element, say a causal mask) has no place in
          // a row group, whose smaller values are per-row, so such a group stays pointwise.
          ok = grp.outer == x;
          for (int m : grp.nodes) ok = ok && g.value(nodes[m].output).type.shape == x;
          if (ok) {
            grp.outer = outer;
            grp.inner = inner;
            grp.has_reduction = true;
          }
        } else {
          ok = grp.outer == outer && grp.inner == inner;
        }
      }
      if (ok) {
        chosen = gi;
        break;
      }
      if (gi == min_group) break;  // joining an earlier group would read a value not yet computed
    }
    if (chosen < 0) {
      Group grp;
      grp.kind = Group::Kind::kKernel;
      if (c == NodeClass::kPointwise) {
        grp.outer = out.shape;
      } else {
        const Shape& x = g.value(n.operands[0]).type.shape;
        const size_t k = n.attrs.get_ints("dims").size();
        grp.outer = split_outer(x, k);
        grp.inner = split_inner(x, k);
        grp.has_reduction = true;
      }
      chosen = static_cast<int>(lp.groups.size());
      lp.groups.push_back(grp);
    }
    lp.groups[chosen].nodes.push_back(static_cast<int>(i));
    lp.group_of[i] = chosen;
  }
  // Kernel names follow Inductor: cpp_fused_<sorted distinct op names>_<n>.
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
