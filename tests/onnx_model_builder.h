// Builds small ONNX models in tests with the ONNX protobuf classes: inputs (symbolic dims as -1),
// initializers, nodes and outputs, saved as a .onnx file.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace crucible::testing {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 17, std::string name = "model") {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name(std::move(name));
  }

  ::onnx::ModelProto& proto() { return m_; }

  // dims: -1 is a symbolic dim named "N".
  void input(const std::string& name, std::vector<int64_t> dims,
             int32_t elem = ::onnx::TensorProto::FLOAT) {
    value_info(m_.mutable_graph()->add_input(), name, dims, elem);
  }
  void output(const std::string& name, int32_t elem = ::onnx::TensorProto::FLOAT) {
    auto* vi = m_.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  ::onnx::TensorProto* initializer(const std::string& name, std::vector<int64_t> dims,
                                   std::vector<float> values) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return t;
  }
  ::onnx::TensorProto* int_initializer(const std::string& name, std::vector<int64_t> values) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t;
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs,
                          std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }
  static void attr_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(::onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(::onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  std::filesystem::path save(const std::filesystem::path& file) const {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    m_.SerializeToOstream(&out);
    return file;
  }

 private:
  static void value_info(::onnx::ValueInfoProto* vi, const std::string& name,
                         const std::vector<int64_t>& dims, int32_t elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0)
        shape->add_dim()->set_dim_param("N");
      else
        shape->add_dim()->set_dim_value(d);
    }
  }

  ::onnx::ModelProto m_;
};

}  // namespace crucible::testing
