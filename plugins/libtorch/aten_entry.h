// What every file of the ATen table shares: an entry (eager call and TorchScript expression) of one
// op, the context it sees of its node, and the helpers that cast operands to crucible's dtypes.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "aten_ops.h"
#include "crucible/ir/graph.h"

namespace crucible::libtorch::aten {

// What an entry sees of its node.
struct Ctx {
  const Graph& g;
  const Node& n;
  DType out;  // the node's result dtype, as crucible's type rule inferred it
  ScriptStyle style = {};
  DType operand(size_t k) const { return g.value(n.operands[k]).type.dtype; }
  const Shape& shape(size_t k) const { return g.value(n.operands[k]).type.shape; }
  const Attrs& a() const { return n.attrs; }
};

using Eager = std::function<at::Tensor(const Ctx&, const std::vector<at::Tensor>&)>;
using Script = std::function<std::string(const Ctx&, const std::vector<std::string>&)>;
// `check`, when set, runs at compile time and throws plugin::CompileError for a node whose
// attributes ask for what no ATen call computes (a resize mode torch does not have).
struct Entry {
  Eager eager;
  Script script;
  std::function<void(const Ctx&)> check = {};
};
using Table = std::map<std::string, Entry>;

// Eager: `x` in dtype `t` (itself when it already is).
at::Tensor as(const at::Tensor& x, DType t);
// Reduction dims of the node's `dims` attribute: absent or [] means every dim.
std::vector<int64_t> reduce_dims(const Ctx& c);
// An (h, w) int-list attribute of one or two elements; {fallback, fallback} when absent or [].
std::vector<int64_t> pair(const Attrs& a, const char* name, int64_t fallback);

// TorchScript: a dtype (the ScalarType's number), operand k as `x` cast to `t`, a float literal,
// an int list literal, a bool literal.
std::string sdtype(DType t);
std::string sas(const Ctx& c, size_t k, const std::string& x, DType t);
std::string sfloat(double v);
std::string sints(const std::vector<int64_t>& v);
std::string sbool(bool b);

// Entries of the common shapes: operands cast to the result dtype (binary, unary) or to their
// common dtype (compare, a bool result), then `torch.NAME`.
Entry binary(const char* name, at::Tensor (*fn)(const at::Tensor&, const at::Tensor&));
Entry compare(const char* name, at::Tensor (*fn)(const at::Tensor&, const at::Tensor&));
Entry unary(const char* name, at::Tensor (*fn)(const at::Tensor&));

// The entries of the ops added for ONNX import: elementwise math (aten_math_ops.cpp); gather,
// argmax/argmin, cumsum, topk, trilu, pad and prod (aten_index_ops.cpp); conv_transpose2d and
// resize (aten_vision_ops.cpp).
void add_math_entries(Table& m);
void add_index_entries(Table& m);
void add_vision_entries(Table& m);

}  // namespace crucible::libtorch::aten
