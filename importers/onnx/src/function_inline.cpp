// Ops ONNX defines as functions of other ops (Celu, MeanVarianceNormalization, the loss ops, ...):
// when no converter claims one, its body from ONNX's own schema is inlined at the model's opset,
// so the importer implements ONNX's definition rather than a copy of it.
#include <fmt/format.h>

#include "converters.h"
#include "onnx/defs/schema.h"
#include "tensor_proto.h"

namespace crucible::onnx {

namespace {

constexpr int kMaxDepth = 8;  // functions calling functions; deeper is a malformed loop
int depth = 0;

::onnx::TypeProto type_proto(const TensorType& t) {
  ::onnx::TypeProto p;
  auto* tt = p.mutable_tensor_type();
  int32_t elem = 0;
  for (int32_t e = 1; e <= 16; ++e)
    if (dtype_of(e) == t.dtype) elem = e;
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : t.shape) shape->add_dim()->set_dim_value(d);
  return p;
}

// The body of `n`'s op at `opset`, or false when ONNX gives none.
bool function_body(Ctx& c, const NodeProto& n, const ::onnx::OpSchema* schema,
                   ::onnx::FunctionProto& fn) {
  if (schema == nullptr) return false;
  if (schema->HasFunction()) {
    fn = *schema->GetFunction();
    return true;
  }
  if (!schema->HasContextDependentFunction()) return false;
  std::vector<::onnx::TypeProto> types;
  for (int i = 0; i < n.input_size(); ++i)
    types.push_back(c.present(n, i) ? type_proto(c.get(n.input(i)).type) : ::onnx::TypeProto());
  ::onnx::FunctionBodyBuildContextImpl ctx(n, types);
  return schema->BuildContextDependentFunction(ctx, fn);
}

}  // namespace

bool inline_function(Ctx& c, const NodeProto& n) {
  const auto* schema = ::onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(c.opset()));
  ::onnx::FunctionProto fn;
  if (!function_body(c, n, schema, fn)) return false;
  // An attribute the caller leaves out has the schema's default, which the body must see too.
  auto caller_attr = [&](const std::string& name) -> const ::onnx::AttributeProto* {
    if (const auto* given = find_attr(n, name)) return given;
    auto it = schema->attributes().find(name);
    if (it == schema->attributes().end()) return nullptr;
    const auto& d = it->second.default_value;
    return d.type() == ::onnx::AttributeProto::UNDEFINED ? nullptr : &d;
  };
  if (depth >= kMaxDepth) malformed("functions nest too deep");
  static int instance = 0;
  const std::string prefix =
      fmt::format("{}.fn{}.", n.name().empty() ? n.op_type() : n.name(), instance++);
  std::unordered_map<std::string, std::string> actual;  // formal name -> the caller's name
  for (int i = 0; i < fn.input_size(); ++i)
    actual[fn.input(i)] = i < n.input_size() ? n.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    actual[fn.output(i)] = i < n.output_size() ? n.output(i) : "";
  auto rename = [&](const std::string& formal) {
    if (formal.empty()) return formal;
    auto it = actual.find(formal);
    if (it != actual.end() && !it->second.empty()) return it->second;
    return prefix + formal;
  };
  int64_t opset = c.opset();
  for (const auto& o : fn.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  ++depth;
  struct Leave {
    Ctx& c;
    int64_t opset;
    ~Leave() {
      --depth;
      c.set_opset(opset);
    }
  } leave{c, c.set_opset(opset)};
  for (const auto& body : fn.node()) {
    NodeProto node = body;
    for (auto& in : *node.mutable_input()) in = rename(in);
    for (auto& out : *node.mutable_output()) out = rename(out);
    // Attributes the body takes from the caller (ref_attr_name); an absent one keeps its default.
    google::protobuf::RepeatedPtrField<::onnx::AttributeProto> attrs;
    for (const auto& a : body.attribute()) {
      if (a.ref_attr_name().empty()) {
        *attrs.Add() = a;
      } else if (const auto* given = caller_attr(a.ref_attr_name())) {
        auto* copy = attrs.Add();
        *copy = *given;
        copy->set_name(a.name());
      }
    }
    node.mutable_attribute()->Swap(&attrs);
    node.set_name(prefix + body.op_type());
    c.begin_node();
    convert_node(c, node);
  }
  return true;
}

}  // namespace crucible::onnx
