// The graph IR: a typed SSA dataflow program (inputs, parameters, nodes, outputs), the analog of an
// FX graph. Building a node infers its type through the op registry, so a Graph is well-typed as
// built.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/attrs.h"

namespace crucible {

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  int64_t numel() const { return shape_numel(shape); }
  // Bytes of a contiguous tensor of this type, as a double: what cost sums and sizes add up.
  double bytes() const {
    return static_cast<double>(numel()) * static_cast<double>(dtype_size(dtype));
  }
  std::string str() const;  // "f32[2,3]"; a 0-d tensor prints "f32[]"
  bool operator==(const TensorType&) const = default;
};

using ValueId = int32_t;

// How a parameter (or an input's recipe) gets its data: randn(seed=7, std=0.02), uniform(...),
// randint(...), zeros(), ones(), full(value=...), file(path="w.bin"). Empty kind: no recipe.
struct Initializer {
  std::string kind;
  Attrs args;
  bool empty() const { return kind.empty(); }
  bool operator==(const Initializer&) const = default;
};

struct SourceLoc {
  int line = 0;
  int col = 0;
};

enum class ValueKind { kInput, kParam, kNode };

struct Value {
  std::string name;  // unique within the graph, printed as %name
  TensorType type;
  ValueKind kind = ValueKind::kNode;
  int node = -1;     // index into nodes() for kNode values
  Initializer init;  // parameters: required unless `data` is bound; inputs: optional recipe
  Tensor data;       // bound parameter data (takes precedence over init)
  SourceLoc loc;     // where `init` is written in the source file (line 0: unknown)
};

struct Node {
  std::string op;
  std::vector<ValueId> operands;
  Attrs attrs;
  ValueId output = -1;
  SourceLoc loc;
};

// Values the graph's own nodes compute as d(sum of loss)/d(wrt[i]): its backward. A backend with
// an autograd of its own may compute `grads` its way instead of running those nodes (which nodes
// they are: gradients.h); every other backend runs the nodes. Printed as
// "gradients(%loss wrt %a, %b) = %ga, %gb".
struct GradientSet {
  ValueId loss = -1;
  std::vector<ValueId> wrt;
  std::vector<ValueId> grads;  // grads[i] has wrt[i]'s type
  bool operator==(const GradientSet&) const = default;
};

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // Directory that file(path=...) initializers are relative to (the .graph file's directory).
  const std::filesystem::path& base_dir() const { return base_dir_; }
  void set_base_dir(std::filesystem::path dir) { base_dir_ = std::move(dir); }
  // The file the graph was parsed from, for messages ("" when built in code).
  const std::string& source_file() const { return source_file_; }
  void set_source_file(std::string file) { source_file_ = std::move(file); }
  void set_source(ValueId id, SourceLoc loc) { mutable_value(id).loc = loc; }
  // "file:line:col: " where value `id`'s recipe is written, or "" when unknown.
  std::string where(ValueId id) const;

  // Builder API. Names must be unique; an empty node name gets a fresh one ("v3").
  // add_node checks operand ids, validates attributes and infers the type; throws GraphError.
  ValueId add_input(std::string name, TensorType type, Initializer recipe = {});
  ValueId add_param(std::string name, TensorType type, Initializer init);
  ValueId add_param_data(std::string name, Tensor data);
  ValueId add_node(std::string op, std::vector<ValueId> operands, Attrs attrs = {},
                   std::string name = "", SourceLoc loc = {});
  void set_outputs(std::vector<ValueId> outputs);
  // Gives value `id` a new unique name (importers name a value once they know what it became).
  void rename_value(ValueId id, std::string name);
  // Declares a gradient set (checked by verify: gradients.h).
  void add_gradients(GradientSet set) { gradients_.push_back(std::move(set)); }

  const std::vector<Value>& values() const { return values_; }
  const Value& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  Value& mutable_value(ValueId id) { return values_.at(static_cast<size_t>(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& params() const { return params_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<GradientSet>& gradients() const { return gradients_; }
  std::optional<ValueId> find_value(std::string_view name) const;

 private:
  ValueId add_value(Value v);

  std::string name_;
  std::filesystem::path base_dir_;
  std::string source_file_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_, params_, outputs_;
  std::vector<GradientSet> gradients_;
  std::unordered_map<std::string, ValueId> by_name_;
};

// Checks SSA form (operands defined before use), unique names, every node's type against its op's
// rule, parameter initializers, and that there is at least one output. Throws GraphError naming the
// node.
void verify(const Graph& g);

// Throws Error unless `inputs` match the graph's inputs in number, dtype and shape: every backend's
// run() starts here, so a caller's mistake reads the same whichever backend it reached.
void check_inputs(const Graph& g, std::span<const Tensor> inputs);

// Throws Error "[what: ]value id V is not a value of graph G (ids 0 to N)" for an id outside the
// graph: what every Executable::intermediates() checks first.
void check_value_ids(const Graph& g, std::span<const ValueId> ids, std::string_view what = {});

// The tensor a parameter holds: its bound data, or its initializer materialized (file paths
// relative to the graph's base_dir). Throws Error for an unknown recipe or a side file of the wrong
// size.
Tensor materialize_param(const Graph& g, ValueId id);
// Checks a recipe before anything runs: a known kind, only its own attributes, each of the right
// kind and in range (randint's range non-empty and inside an integer dtype; std >= 0; finite
// bounds; file's path a string). Throws Error saying which attribute and why.
void check_initializer(const Initializer& init, const TensorType& type);
// Checks every file(path=...) parameter's and input's side file before anything runs: it exists, is
// a regular file and holds exactly the bytes its type needs. Throws Error at the recipe's
// file:line:col.
void check_side_files(const Graph& g);
// Builds a tensor of `type` from a recipe; `seed` overrides the recipe's own seed when it has none.
Tensor materialize(const Initializer& init, const TensorType& type,
                   const std::filesystem::path& base_dir, uint64_t default_seed);
// Seeded inputs for a run: input k uses its recipe, or randn for floats / randint for integers and
// bool, with stream derive_seed(seed, k).
std::vector<Tensor> make_inputs(const Graph& g, uint64_t seed);
// --seed for parameters: every random parameter recipe (randn, uniform, randint) of `g` draws from
// stream derive_seed(seed, k) mixed with its own seed, so another run seed gives other weights.
// Seed 0 leaves the recipes as written; bound data and file(...) parameters never change.
void reseed_params(Graph& g, uint64_t seed);

}  // namespace crucible
