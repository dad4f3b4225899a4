// The importer's state while it walks a model: ONNX value names bound to graph values or to
// constants known at import time, node emission that folds constant operands, and attribute reads.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crucible/ir/graph.h"
#include "crucible/onnx/import.h"
#include "onnx/onnx_pb.h"

namespace crucible::onnx {

using ::onnx::NodeProto;

// An ONNX value as the importer knows it: a graph value, or a constant (an initializer or the
// result of folding) that becomes a parameter only when a graph node reads it.
struct Val {
  ValueId id = -1;
  Tensor constant;
  TensorType type;
  std::string name;  // the ONNX name it was bound to ("" for an intermediate)
  // An input's data when the import was given it (a test case): used only where an op needs a
  // constant (a Reshape's shape), specializing the model to the data it will run on.
  Tensor known;
  bool is_const() const { return constant.defined(); }
  // The constant, or an input's known data, or an undefined tensor.
  const Tensor& value() const { return is_const() ? constant : known; }
  int64_t rank() const { return static_cast<int64_t>(type.shape.size()); }
};

// Throws ImportError(unsupported=true): what the importer does not implement.
[[noreturn]] void unsupported(const std::string& what);
// Throws ImportError(unsupported=false): what the model gets wrong.
[[noreturn]] void malformed(const std::string& what);

class Ctx {
 public:
  Ctx(Graph& g, const ImportOptions& options, int64_t opset)
      : g_(g), opts_(options), opset_(opset) {}

  Graph& graph() { return g_; }
  int64_t opset() const { return opset_; }
  // The most elements a constant the importer makes may hold (ImportOptions::fold_limit).
  int64_t fold_limit() const { return opts_.fold_limit; }
  // A function body runs at the opset it was written for; returns the previous one.
  int64_t set_opset(int64_t opset) { return std::exchange(opset_, opset); }

  // Binding ONNX names. define() names a node value made for this ONNX value after it.
  bool has(const std::string& onnx_name) const { return values_.contains(onnx_name); }
  const Val& get(const std::string& onnx_name) const;
  void define(const std::string& onnx_name, Val v);

  // A graph value id for `v`: a constant becomes a parameter (once per ONNX name).
  ValueId id_of(const Val& v);
  // Emits `op`; when every operand is a constant and the result is small, runs the registry
  // kernel now instead (constant folding: the Shape/Gather/Concat chains exporters write).
  Val op(const std::string& op, const std::vector<Val>& operands, Attrs attrs = {});
  Val constant(Tensor t) const;
  Val scalar(double value, DType dtype) const;

  // Inputs of the node being converted: present() is false for a missing optional input.
  bool present(const NodeProto& n, int i) const {
    return i < n.input_size() && !n.input(i).empty();
  }
  Val in(const NodeProto& n, int i) const;
  std::optional<Val> opt_in(const NodeProto& n, int i) const;
  // A constant input read as integers (axes, shapes, pads); unsupported when it is computed.
  std::vector<int64_t> const_ints(const NodeProto& n, int i) const;
  void out(const NodeProto& n, int i, Val v);

  // Where values made for the current node start (define() renames only those).
  void begin_node() { node_first_value_ = static_cast<ValueId>(g_.values().size()); }

 private:
  Graph& g_;
  const ImportOptions& opts_;
  int64_t opset_;
  std::unordered_map<std::string, Val> values_;
  ValueId node_first_value_ = 0;
};

// A graph-safe spelling of an ONNX name ([A-Za-z_][A-Za-z0-9_.]*), unique in `g`.
std::string graph_name(const Graph& g, const std::string& onnx_name);

// Attribute reads with the ONNX defaults; a present attribute of the wrong type is malformed.
const ::onnx::AttributeProto* find_attr(const NodeProto& n, const std::string& name);
int64_t attr_int(const NodeProto& n, const std::string& name, int64_t fallback);
double attr_float(const NodeProto& n, const std::string& name, double fallback);
std::string attr_string(const NodeProto& n, const std::string& name, const std::string& fallback);
std::optional<std::vector<int64_t>> attr_ints(const NodeProto& n, const std::string& name);
std::optional<std::vector<double>> attr_floats(const NodeProto& n, const std::string& name);

// An axis in [-rank, rank) made non-negative; malformed otherwise.
int64_t norm_axis(int64_t axis, int64_t rank, const char* what = "axis");

}  // namespace crucible::onnx
