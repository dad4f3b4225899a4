// Memory planning: which values live in buffers (everything read outside the kernel that computes
// it), what each kernel reads and writes, and which outputs overwrite a dying input buffer in
// place.
#include <algorithm>
#include <set>

#include "crucible/ir/op_registry.h"
#include "passes.h"

namespace crucible::codegen {

bool view_layout(const Graph& g, int node, const std::vector<NodeClass>& classes, ValueId& base,
                 Shape& shape, Shape& strides, int64_t& offset) {
  const Node& n = g.nodes()[node];
  const ValueId src = n.operands[0];
  const int producer = g.value(src).kind == ValueKind::kNode ? g.value(src).node : -1;
  Tensor fake;
  if (producer >= 0 && classes[producer] == NodeClass::kView) {
    Shape s, st;
    int64_t off;
    if (!view_layout(g, producer, classes, base, s, st, off)) return false;
    fake = Tensor::empty(g.value(src).type.dtype, {1}).as_strided(s, st, off);
  } else {
    base = src;
    const Shape& s = g.value(src).type.shape;
    fake = Tensor::empty(g.value(src).type.dtype, {1}).as_strided(s, contiguous_strides(s), 0);
  }
  Tensor v;
  if (n.op == "reshape") {
    auto view = fake.try_view(n.attrs.get_ints("shape"));
    if (!view) return false;
    v = *view;
  } else {
    // Every other view op's kernel only rewrites metadata, so it runs safely on the 1-element
    // stand-in.
    v = OpRegistry::global().get(n.op).kernel(std::vector<Tensor>{fake}, n.attrs);
  }
  shape = v.shape();
  strides = v.strides();
  offset = v.offset();
  return true;
}

namespace {

// The base buffer behind a value (a view resolves to what it views).
ValueId base_of(const Graph& g, const LoopProgram& lp, ValueId v) {
  while (g.value(v).kind == ValueKind::kNode && lp.classes[g.value(v).node] == NodeClass::kView) {
    v = g.nodes()[g.value(v).node].operands[0];
  }
  return v;
}

// Which values live in buffers: inputs, parameters, graph outputs, every value a non-kernel group
// computes and every value read outside the kernel group computing it. Kept values computed
// inside a kernel become extra outputs of it (constants have no kernel; the runtime evaluates
// them).
void mark_materialized(const Graph& g, const LoopProgram& lp, const std::set<ValueId>& keep,
                       MemoryPlan& mp) {
  const auto& nodes = g.nodes();
  mp.materialized.assign(g.values().size(), false);
  std::set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());
  for (ValueId v : g.inputs()) mp.materialized[v] = true;
  for (ValueId v : g.params()) mp.materialized[v] = true;
  auto group_of_value = [&](ValueId v) {
    const Value& val = g.value(v);
    return val.kind == ValueKind::kNode ? lp.group_of[val.node] : -1;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (lp.classes[i] == NodeClass::kConstant) continue;
    const int gi = lp.group_of[i];
    if (lp.groups[gi].kind != Group::Kind::kKernel || graph_outputs.contains(n.output)) {
      mp.materialized[n.output] = true;
    }
    for (ValueId o : n.operands) {
      const int og = group_of_value(o);
      const bool constant = og < 0 && g.value(o).kind == ValueKind::kNode;
      if (!constant && (og != gi || lp.groups[gi].kind != Group::Kind::kKernel))
        mp.materialized[o] = true;
    }
  }
  for (ValueId v : keep) {
    const Value& val = g.value(v);
    if (val.kind != ValueKind::kNode || mp.materialized[v] ||
        lp.classes[val.node] == NodeClass::kConstant) {
      continue;
    }
    mp.materialized[v] = true;
    mp.extra.insert(v);
  }
}

// Per base buffer, the last group reading it, directly or through a view; INT32_MAX for one that
// is returned (a graph output or a kept value), so never overwritten.
std::vector<int> last_reads(const Graph& g, const LoopProgram& lp, const std::set<ValueId>& keep) {
  std::vector<int> last_read(g.values().size(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId o : g.nodes()[i].operands) {
      const ValueId b = base_of(g, lp, o);
      last_read[b] = std::max(last_read[b], lp.group_of[i]);
    }
  }
  for (ValueId o : g.outputs()) last_read[base_of(g, lp, o)] = INT32_MAX;
  for (ValueId v : keep) last_read[base_of(g, lp, v)] = INT32_MAX;
  return last_read;
}

// Whether every read of buffer `b` in group `grp` is element for element (never broadcast, never
// through a view).
bool read_directly(const Graph& g, const LoopProgram& lp, const Group& grp, ValueId b) {
  for (int ni : grp.nodes) {
    const Node& n = g.nodes()[ni];
    for (ValueId o : n.operands) {
      if (base_of(g, lp, o) == b &&
          (o != b || g.value(n.output).type.shape != g.value(b).type.shape))
        return false;
    }
  }
  return true;
}

// Kernel group `gi`'s input buffers, materialized outputs and, per output, the input it overwrites
// in place (-1: none). A pointwise kernel may write an output over an input buffer that dies
// here, when that input is an intermediate of the same size and dtype read element for element,
// so each element is read before it is overwritten at the same index.
void plan_kernel(const Graph& g, const LoopProgram& lp, size_t gi,
                 const std::vector<int>& last_read, MemoryPlan& mp) {
  const auto& nodes = g.nodes();
  const Group& grp = lp.groups[gi];
  std::set<ValueId> in_group;
  for (int ni : grp.nodes) in_group.insert(nodes[ni].output);
  std::vector<ValueId>& ins = mp.inputs[gi];
  for (int ni : grp.nodes) {
    for (ValueId o : nodes[ni].operands) {
      if (in_group.contains(o) || !mp.materialized[o]) continue;
      const ValueId b = base_of(g, lp, o);
      if (std::find(ins.begin(), ins.end(), b) == ins.end()) ins.push_back(b);
    }
  }
  for (int ni : grp.nodes) {
    if (mp.materialized[nodes[ni].output]) mp.outputs[gi].push_back(nodes[ni].output);
  }
  std::set<size_t> used;
  for (ValueId out : mp.outputs[gi]) {
    int chosen = -1;
    for (size_t k = 0; k < ins.size() && !grp.has_reduction; ++k) {
      const ValueId b = ins[k];
      const Value& bv = g.value(b);
      if (used.contains(k) || bv.kind != ValueKind::kNode || last_read[b] != static_cast<int>(gi))
        continue;
      if (bv.type != g.value(out).type || !read_directly(g, lp, grp, b)) continue;
      chosen = static_cast<int>(k);
      used.insert(k);
      break;
    }
    mp.in_place[gi].push_back(chosen);
  }
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const LoopProgram& lp, const std::set<ValueId>& keep) {
  MemoryPlan mp;
  mark_materialized(g, lp, keep, mp);
  const std::vector<int> last_read = last_reads(g, lp, keep);
  mp.in_place.resize(lp.groups.size());
  mp.inputs.resize(lp.groups.size());
  mp.outputs.resize(lp.groups.size());
  for (size_t gi = 0; gi < lp.groups.size(); ++gi) {
    if (lp.groups[gi].kind == Group::Kind::kKernel) plan_kernel(g, lp, gi, last_read, mp);
  }
  return mp;
}

}  // namespace crucible::codegen
