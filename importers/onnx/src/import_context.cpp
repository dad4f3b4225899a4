// The importer's value table, folding emission and attribute reads (see import_context.h).
#include "import_context.h"

#include <fmt/format.h>

#include "crucible/ir/op_registry.h"

namespace crucible::onnx {

void unsupported(const std::string& what) { throw ImportError(what, true); }
void malformed(const std::string& what) { throw ImportError(what, false); }

std::string graph_name(const Graph& g, const std::string& onnx_name) {
  std::string s;
  for (char c : onnx_name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    s += ok ? c : '_';
  }
  while (!s.empty() && s.front() == '_' && s.size() > 1 && s[1] == '_') s.erase(0, 1);
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) s = "v_" + s;
  if (!g.find_value(s)) return s;
  for (int k = 2;; ++k) {
    std::string candidate = fmt::format("{}.{}", s, k);
    if (!g.find_value(candidate)) return candidate;
  }
}

const Val& Ctx::get(const std::string& onnx_name) const {
  auto it = values_.find(onnx_name);
  if (it == values_.end())
    malformed(
        fmt::format("'{}' is read before anything defines it (a dangling input, a cycle, or "
                    "nodes out of order)",
                    onnx_name));
  return it->second;
}

void Ctx::define(const std::string& onnx_name, Val v) {
  if (values_.contains(onnx_name)) malformed(fmt::format("'{}' is defined twice", onnx_name));
  if (!v.is_const() && v.id >= node_first_value_ && v.name.empty()) {
    g_.rename_value(v.id, graph_name(g_, onnx_name));
  }
  v.name = onnx_name;
  values_[onnx_name] = std::move(v);
}

ValueId Ctx::id_of(const Val& v) {
  if (!v.is_const()) return v.id;
  if (!v.name.empty()) {
    Val& bound = values_.at(v.name);
    if (bound.id < 0) bound.id = g_.add_param_data(graph_name(g_, v.name), v.constant);
    return bound.id;
  }
  return g_.add_param_data(graph_name(g_, "const"), v.constant);
}

Val Ctx::constant(Tensor t) const {
  Val v;
  v.type = TensorType{t.dtype(), t.shape()};
  v.constant = t.is_contiguous() ? std::move(t) : t.contiguous();
  return v;
}

Val Ctx::scalar(double value, DType dtype) const {
  return constant(Tensor::full(dtype, {}, value));
}

namespace {
constexpr int64_t kKnownLimit = 4096;
}  // namespace

Val Ctx::op(const std::string& op, const std::vector<Val>& operands, Attrs attrs) {
  bool all_const = true, all_known = true;
  std::vector<TensorType> types;
  for (const Val& v : operands) {
    all_const = all_const && v.is_const();
    all_known = all_known && v.value().defined();
    types.push_back(v.type);
  }
  // One inference up front: it checks the node and normalizes `attrs` for the kernel.
  const OpDef& def = OpRegistry::global().get(op);
  const TensorType type = infer_type(def, types, attrs);
  auto evaluate = [&] {
    std::vector<Tensor> tensors;
    for (const Val& v : operands) tensors.push_back(v.value());
    return def.kernel(tensors, attrs).contiguous();
  };
  if (all_const && type.numel() <= opts_.fold_limit) return constant(evaluate());
  std::vector<ValueId> ids;
  for (const Val& v : operands) ids.push_back(id_of(v));
  Val r;
  r.id = g_.add_node(op, ids, attrs);
  r.type = type;
  // Small values computed from inputs whose data the import was given are known too, so a
  // Range or Reshape fed by arithmetic on them still finds its constant.
  if (all_known && type.numel() <= kKnownLimit) r.known = evaluate();
  return r;
}

Val Ctx::in(const NodeProto& n, int i) const {
  if (!present(n, i)) malformed(fmt::format("input {} is missing", i));
  return get(n.input(i));
}

std::optional<Val> Ctx::opt_in(const NodeProto& n, int i) const {
  if (!present(n, i)) return std::nullopt;
  return get(n.input(i));
}

std::vector<int64_t> Ctx::const_ints(const NodeProto& n, int i) const {
  const Val v = in(n, i);
  if (!v.value().defined())
    unsupported(
        fmt::format("input {} ('{}') is computed at run time; only constant values are "
                    "supported there",
                    i, n.input(i)));
  if (is_floating(v.type.dtype)) malformed(fmt::format("input {} must hold integers", i));
  std::vector<int64_t> r;
  const Tensor t = v.value().to(DType::kI64);
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

void Ctx::out(const NodeProto& n, int i, Val v) {
  if (i < n.output_size() && !n.output(i).empty()) define(n.output(i), std::move(v));
}

const ::onnx::AttributeProto* find_attr(const NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const NodeProto& n, const std::string& name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::INT)
    malformed(fmt::format("attribute {} must be an int", name));
  return a->i();
}

double attr_float(const NodeProto& n, const std::string& name, double fallback) {
  const auto* a = find_attr(n, name);
  if (!a) return fallback;
  if (a->type() == ::onnx::AttributeProto::INT) return static_cast<double>(a->i());
  if (a->type() != ::onnx::AttributeProto::FLOAT)
    malformed(fmt::format("attribute {} must be a float", name));
  return a->f();
}

std::string attr_string(const NodeProto& n, const std::string& name, const std::string& fallback) {
  const auto* a = find_attr(n, name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::STRING)
    malformed(fmt::format("attribute {} must be a string", name));
  return a->s();
}

std::optional<std::vector<int64_t>> attr_ints(const NodeProto& n, const std::string& name) {
  const auto* a = find_attr(n, name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::INTS)
    malformed(fmt::format("attribute {} must be ints", name));
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::vector<double>> attr_floats(const NodeProto& n, const std::string& name) {
  const auto* a = find_attr(n, name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::FLOATS)
    malformed(fmt::format("attribute {} must be floats", name));
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

int64_t norm_axis(int64_t axis, int64_t rank, const char* what) {
  // A 0-d input has no axis: its callers index the shape with what this returns.
  if (axis < -rank || axis >= rank)
    malformed(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace crucible::onnx
