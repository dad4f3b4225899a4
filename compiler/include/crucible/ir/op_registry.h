// The op registry: every op's schema (operand count, attributes), its type rule and its reference
// kernel. One registry serves the parser, the verifier, the eager backend and codegen's fallback.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/attrs.h"
#include "crucible/ir/graph.h"

namespace crucible {

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
};

struct OpSchema {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  std::vector<AttrSpec> attrs;
};

// Type rule: operand types + attributes -> result type. Throws Error with a message that does not
// repeat the op name (the caller prefixes it).
using TypeRule = std::function<TensorType(std::span<const TensorType>, const Attrs&)>;
// Reference kernel: operand tensors (any strides) -> a result of exactly the inferred type. The
// result may be a view of an operand (reshape, permute, ...); callers must not write into results.
using Kernel = std::function<Tensor(std::span<const Tensor>, const Attrs&)>;

// What one op must do at the least, for the roofline: arithmetic (a multiply-add counts as two
// FLOPs, any other arithmetic or transcendental step as one per element) and the bytes it reads
// from each operand and writes, when nothing stays cached between ops. A view (reshape, permute,
// ...) reads and writes nothing: its result aliases operand 0.
struct OpCost {
  double flops = 0;
  double macs = 0;            // the multiply-adds among the FLOPs (GEMM, convolution)
  std::vector<double> reads;  // bytes read from each operand
  double writes = 0;          // bytes of the result
  bool view = false;          // the result is operand 0 seen another way
  double bytes() const;       // reads + writes
};
// Cost rule: operand types + result type + attributes -> the op's cost.
using CostRule =
    std::function<OpCost(std::span<const TensorType>, const TensorType&, const Attrs&)>;

struct OpDef {
  OpSchema schema;
  TypeRule infer;
  Kernel kernel;
  // Empty: an elementwise op's cost (one FLOP per result element, every operand read whole).
  CostRule cost;
};

class OpRegistry {
 public:
  // Adds an op library's ops to a registry. Op libraries sit above the IR layer, so the IR never
  // names them: each one registers an installer when it is loaded (see OpLibrary).
  using Installer = void (*)(OpRegistry&);

  // The process-wide registry holding the ops of every loaded op library.
  static OpRegistry& global();
  // Runs `install` on the global registry (now if it exists, else when it is first used).
  static void add_installer(Installer install);

  void add(OpDef def);  // throws Error on a duplicate name
  const OpDef* find(std::string_view name) const;
  const OpDef& get(std::string_view name) const;  // throws Error "unknown op 'name'"
  std::vector<std::string> names() const;         // sorted

 private:
  std::unordered_map<std::string, OpDef> ops_;
};

// A namespace-scope instance in an op library's shared object adds its ops to the global registry
// when the object is loaded: `const OpLibrary kMyOps{register_my_ops};`.
struct OpLibrary {
  explicit OpLibrary(OpRegistry::Installer install) { OpRegistry::add_installer(install); }
};

// Checks operand count and attributes against the schema (unknown, missing, wrong kind; an int
// given for a float attribute is converted), then applies the type rule. Throws GraphError "op:
// message".
TensorType infer_type(const OpDef& op, std::span<const TensorType> operands, Attrs& attrs);

// The op's cost on these types (its cost rule, or the elementwise default).
OpCost op_cost(const OpDef& op, std::span<const TensorType> operands, const TensorType& result,
               const Attrs& attrs);
// Cost rules shared by op families: every operand read whole, the result written, and `flops`.
OpCost streaming_cost(std::span<const TensorType> operands, const TensorType& result, double flops);
// A GEMM or convolution: `macs` multiply-adds plus `extra` FLOPs (a bias), operands read whole.
OpCost contraction_cost(std::span<const TensorType> operands, const TensorType& result, double macs,
                        double extra);
// Views move nothing; data movement (cat, pad, cast, gather...) moves its bytes and computes none.
OpCost view_cost(std::span<const TensorType> operands, const TensorType& result, const Attrs&);
OpCost movement_cost(std::span<const TensorType> operands, const TensorType& result, const Attrs&);

// Runs one op's reference kernel on tensors (infers the type first, so bad input gets a clear
// error).
Tensor run_op(std::string_view op, std::span<const Tensor> operands, Attrs attrs = {});

}  // namespace crucible
