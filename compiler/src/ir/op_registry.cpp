// The global op registry, schema checking and the single-op runner.
#include "crucible/ir/op_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "crucible/core/error.h"

namespace crucible {

namespace {

// Installers are collected during static initialisation of the op libraries, which may happen
// before or after the first use of the registry; both orders end with every library installed.
struct GlobalRegistry {
  std::mutex mutex;
  std::vector<OpRegistry::Installer> pending;
  OpRegistry* registry = nullptr;  // never destroyed: kernels may run during static destruction
};

GlobalRegistry& global_state() {
  static GlobalRegistry* state = new GlobalRegistry();
  return *state;
}

}  // namespace

OpRegistry& OpRegistry::global() {
  // Built once (a thread-safe static), so looking ops up afterwards takes no lock.
  static OpRegistry* const registry = [] {
    GlobalRegistry& g = global_state();
    std::lock_guard<std::mutex> lock(g.mutex);
    g.registry = new OpRegistry();
    for (Installer install : g.pending) install(*g.registry);
    g.pending.clear();
    return g.registry;
  }();
  return *registry;
}

void OpRegistry::add_installer(Installer install) {
  GlobalRegistry& g = global_state();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.registry)
    install(*g.registry);
  else
    g.pending.push_back(install);
}

void OpRegistry::add(OpDef def) {
  std::string name = def.schema.name;
  if (!ops_.emplace(name, std::move(def)).second)
    throw Error(fmt::format("op '{}' registered twice", name));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(std::string(name));
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* d = find(name)) return *d;
  if (ops_.empty())  // the program did not link an op library (crucible::ops)
    throw GraphError(fmt::format("unknown op '{}' (no op library is loaded)", name));
  throw GraphError(fmt::format("unknown op '{}'", name));
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : ops_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

double OpCost::bytes() const {
  double total = writes;
  for (double r : reads) total += r;
  return total;
}

OpCost streaming_cost(std::span<const TensorType> operands, const TensorType& result,
                      double flops) {
  OpCost c;
  c.flops = flops;
  for (const TensorType& t : operands) c.reads.push_back(t.bytes());
  c.writes = result.bytes();
  return c;
}

OpCost contraction_cost(std::span<const TensorType> operands, const TensorType& result, double macs,
                        double extra) {
  OpCost c = streaming_cost(operands, result, 2 * macs + extra);
  c.macs = macs;
  return c;
}

OpCost view_cost(std::span<const TensorType> operands, const TensorType&, const Attrs&) {
  OpCost c;
  c.reads.assign(operands.size(), 0.0);
  c.view = true;
  return c;
}

OpCost movement_cost(std::span<const TensorType> operands, const TensorType& result, const Attrs&) {
  return streaming_cost(operands, result, 0);
}

OpCost op_cost(const OpDef& op, std::span<const TensorType> operands, const TensorType& result,
               const Attrs& attrs) {
  if (op.cost) return op.cost(operands, result, attrs);
  return streaming_cost(operands, result, static_cast<double>(result.numel()));
}

TensorType infer_type(const OpDef& op, std::span<const TensorType> operands, Attrs& attrs) {
  const OpSchema& s = op.schema;
  const int n = static_cast<int>(operands.size());
  if (n < s.min_inputs || (s.max_inputs >= 0 && n > s.max_inputs)) {
    std::string expected = s.max_inputs < 0 ? fmt::format("at least {}", s.min_inputs)
                           : s.min_inputs == s.max_inputs
                               ? fmt::format("{}", s.min_inputs)
                               : fmt::format("{} to {}", s.min_inputs, s.max_inputs);
    throw GraphError(fmt::format("{}: expects {} operand{}, got {}", s.name, expected,
                                 expected == "1" ? "" : "s", n));
  }
  Attrs checked;
  for (const auto& [name, value] : attrs.items()) {
    // An init-capture: clang before 16 cannot capture a structured binding.
    auto spec = std::find_if(s.attrs.begin(), s.attrs.end(),
                             [&n = name](const AttrSpec& a) { return a.name == n; });
    if (spec == s.attrs.end())
      throw GraphError(fmt::format("{}: unknown attribute '{}'", s.name, name));
    AttrKind got = attr_kind_of(value);
    if (got == spec->kind) {
      checked.set(name, value);
    } else if (spec->kind == AttrKind::kFloat && got == AttrKind::kInt) {
      checked.set(name, static_cast<double>(std::get<int64_t>(value)));
    } else if (spec->kind == AttrKind::kInts && got == AttrKind::kInt) {
      checked.set(name, std::vector<int64_t>{std::get<int64_t>(value)});
    } else {
      throw GraphError(fmt::format("{}: attribute '{}' must be {}, got {}", s.name, name,
                                   attr_kind_name(spec->kind), attr_kind_name(got)));
    }
  }
  for (const AttrSpec& a : s.attrs) {
    if (a.required && !checked.has(a.name)) {
      throw GraphError(fmt::format("{}: missing attribute '{}'", s.name, a.name));
    }
  }
  attrs = std::move(checked);
  try {
    return op.infer(operands, attrs);
  } catch (const GraphError&) {
    throw;
  } catch (const Error& e) {
    throw GraphError(fmt::format("{}: {}", s.name, e.what()));
  }
}

Tensor run_op(std::string_view name, std::span<const Tensor> operands, Attrs attrs) {
  const OpDef& op = OpRegistry::global().get(name);
  std::vector<TensorType> types;
  for (const Tensor& t : operands) types.push_back({t.dtype(), t.shape()});
  infer_type(op, types, attrs);
  return op.kernel(operands, attrs);
}

}  // namespace crucible
