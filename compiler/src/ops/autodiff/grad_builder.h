// What a gradient rule builds its nodes with: the joint graph under construction, the forward
// node, the gradient of its result, and helpers for the shapes gradients take (broadcast sums).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::autodiff {

// A `full` node of `shape` filled with `value`.
ValueId filled(Graph& g, const Shape& shape, double value, DType dtype);

class GradBuilder {
 public:
  GradBuilder(Graph& g, const Node& node, ValueId grad_out, std::vector<bool> wants)
      : g_(g), node_(node), gy_(grad_out), wants_(std::move(wants)) {}

  const Node& node() const { return node_; }
  ValueId x(size_t k) const { return node_.operands.at(k); }  // operand k
  ValueId y() const { return node_.output; }                  // the forward result
  ValueId gy() const { return gy_; }                          // d(loss) / d(result)
  // Whether operand k's gradient is needed (it leads back to a value differentiated for).
  bool wants(size_t k) const { return k < wants_.size() && wants_[k]; }
  // Copies: the graph's values move as rules add nodes.
  TensorType type(ValueId v) const { return g_.value(v).type; }
  Shape shape(ValueId v) const { return g_.value(v).type.shape; }

  ValueId op(const std::string& name, std::vector<ValueId> operands, Attrs attrs = {});
  ValueId scalar(double value, DType dtype);  // a 0-d constant
  ValueId filled(const Shape& shape, double value, DType dtype) {
    return autodiff::filled(g_, shape, value, dtype);
  }
  ValueId scalar_like(double value, ValueId like) { return scalar(value, type(like).dtype); }
  ValueId mul(ValueId a, ValueId b) { return op("mul", {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op("div", {a, b}); }
  ValueId add(ValueId a, ValueId b) { return op("add", {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op("sub", {a, b}); }
  ValueId neg(ValueId a) { return op("neg", {a}); }
  ValueId times(ValueId a, double c) { return mul(a, scalar_like(c, a)); }
  // A bool mask as a 0/1 tensor of `like`'s dtype.
  ValueId as_number(ValueId mask, ValueId like);
  // gy where `mask`, else 0.
  ValueId masked(ValueId mask, ValueId g);
  // A broadcast gradient summed back to `shape` (the operand's): over the leading dims the
  // broadcast added and over the dims it stretched from 1.
  ValueId sum_to(ValueId g, const Shape& shape);
  // A gradient over a reduction's kept shape stretched back over `dims` of `shape` (dims empty:
  // all), given whether the reduction kept them.
  ValueId expand_over(ValueId g, const Shape& shape, const std::vector<int64_t>& dims,
                      bool keepdim);

 private:
  Graph& g_;
  const Node& node_;
  ValueId gy_;
  std::vector<bool> wants_;
  int made_ = 0;  // nodes this rule built, for their names
};

// A rule: the gradients of a node's operands (-1 for one that has none, or is not wanted).
using Grads = std::vector<ValueId>;
using GradRule = std::function<Grads(GradBuilder&)>;
using GradTable = std::map<std::string, GradRule>;

// Each family's rules (one file each).
void add_elementwise_grads(GradTable& t);
void add_reduction_grads(GradTable& t);
void add_linalg_grads(GradTable& t);
void add_shape_grads(GradTable& t);
void add_index_grads(GradTable& t);
void add_vision_grads(GradTable& t);

// A dim attribute of a rank-`rank` operand counted from 0 (negative ones from the end).
int64_t wrap_dim(int64_t d, size_t rank);

// The product of dims [from, to) of `s` (1 for none).
int64_t product(const Shape& s, size_t from, size_t to);

// The reduced dims of a reduction's `dims` attribute on a rank-`rank` operand, normalized and
// sorted (empty attribute: every dim).
std::vector<int64_t> reduced_dims(const Attrs& attrs, size_t rank);

}  // namespace crucible::autodiff
