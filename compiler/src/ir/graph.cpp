// Graph construction (with type inference on every node) and parameter/input materialization.
#include "crucible/ir/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "crucible/ir/op_registry.h"

namespace crucible {

std::string TensorType::str() const {
  return fmt::format("{}{}", dtype_name(dtype), shape_str(shape));
}

ValueId Graph::add_value(Value v) {
  if (v.name.empty()) {
    // Fresh names skip any the user already took.
    for (size_t n = values_.size();; ++n) {
      std::string candidate = fmt::format("v{}", n);
      if (!by_name_.contains(candidate)) {
        v.name = std::move(candidate);
        break;
      }
    }
  } else if (by_name_.contains(v.name)) {
    throw GraphError(fmt::format("value %{} is defined twice", v.name));
  }
  for (int64_t s : v.type.shape) {
    if (s < 0)
      throw GraphError(fmt::format("value %{} has a negative size in {}", v.name, v.type.str()));
  }
  const auto id = static_cast<ValueId>(values_.size());
  by_name_.emplace(v.name, id);
  values_.push_back(std::move(v));
  return id;
}

ValueId Graph::add_input(std::string name, TensorType type, Initializer recipe) {
  ValueId id = add_value(
      Value{std::move(name), std::move(type), ValueKind::kInput, -1, std::move(recipe), {}, {}});
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_param(std::string name, TensorType type, Initializer init) {
  ValueId id = add_value(
      Value{std::move(name), std::move(type), ValueKind::kParam, -1, std::move(init), {}, {}});
  params_.push_back(id);
  return id;
}

ValueId Graph::add_param_data(std::string name, Tensor data) {
  TensorType type{data.dtype(), data.shape()};
  ValueId id = add_value(
      Value{std::move(name), std::move(type), ValueKind::kParam, -1, {}, std::move(data), {}});
  params_.push_back(id);
  return id;
}

ValueId Graph::add_node(std::string op, std::vector<ValueId> operands, Attrs attrs,
                        std::string name, SourceLoc loc) {
  const OpDef& def = OpRegistry::global().get(op);
  std::vector<TensorType> types;
  types.reserve(operands.size());
  for (ValueId v : operands) {
    if (v < 0 || static_cast<size_t>(v) >= values_.size()) {
      throw GraphError(fmt::format("{}: operand id {} is not defined", op, v));
    }
    types.push_back(values_[v].type);
  }
  TensorType type = infer_type(def, types, attrs);
  try {
    check_shape_bytes(type.shape, dtype_size(type.dtype));
  } catch (const Error& e) {
    throw GraphError(fmt::format("{}: result {}", op, e.what()));
  }
  ValueId id = add_value(Value{std::move(name),
                               std::move(type),
                               ValueKind::kNode,
                               static_cast<int>(nodes_.size()),
                               {},
                               {},
                               {}});
  nodes_.push_back(Node{std::move(op), std::move(operands), std::move(attrs), id, loc});
  return id;
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  for (ValueId v : outputs) {
    if (v < 0 || static_cast<size_t>(v) >= values_.size()) {
      throw GraphError(fmt::format("output id {} is not defined", v));
    }
  }
  outputs_ = std::move(outputs);
}

void Graph::rename_value(ValueId id, std::string name) {
  Value& v = mutable_value(id);
  if (v.name == name) return;
  if (name.empty() || by_name_.contains(name))
    throw GraphError(
        fmt::format("cannot rename %{} to %{}: the name is taken or empty", v.name, name));
  by_name_.erase(v.name);
  by_name_[name] = id;
  v.name = std::move(name);
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::string Graph::where(ValueId id) const {
  const SourceLoc& loc = value(id).loc;
  if (loc.line <= 0) return source_file_.empty() ? "" : source_file_ + ": ";
  return fmt::format("{}:{}:{}: ", source_file_.empty() ? "<graph>" : source_file_, loc.line,
                     loc.col);
}

namespace {
struct RecipeSpec {
  const char* kind;
  std::vector<std::pair<const char*, AttrKind>> args;  // kFloat accepts ints too
  std::vector<const char*> required;
};
std::pair<int64_t, int64_t> integer_range(DType t) {
  switch (t) {
    case DType::kU8:
      return {0, 255};
    case DType::kI32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

const std::vector<RecipeSpec>& recipe_specs() {
  static const std::vector<RecipeSpec> specs = {
      {"randn",
       {{"seed", AttrKind::kInt}, {"mean", AttrKind::kFloat}, {"std", AttrKind::kFloat}},
       {}},
      {"uniform",
       {{"seed", AttrKind::kInt}, {"low", AttrKind::kFloat}, {"high", AttrKind::kFloat}},
       {}},
      {"randint",
       {{"seed", AttrKind::kInt}, {"low", AttrKind::kInt}, {"high", AttrKind::kInt}},
       {"high"}},
      {"zeros", {}, {}},
      {"ones", {}, {}},
      {"full", {{"value", AttrKind::kFloat}}, {"value"}},
      {"file", {{"path", AttrKind::kString}}, {"path"}},
  };
  return specs;
}

const RecipeSpec* find_recipe(std::string_view kind) {
  const auto& specs = recipe_specs();
  auto spec =
      std::find_if(specs.begin(), specs.end(), [&](const RecipeSpec& s) { return kind == s.kind; });
  return spec == specs.end() ? nullptr : &*spec;
}
}  // namespace

void check_initializer(const Initializer& init, const TensorType& type) {
  const RecipeSpec* spec = find_recipe(init.kind);
  if (spec == nullptr) {
    throw Error(
        fmt::format("unknown initializer '{}' (expected randn, uniform, randint, zeros, ones, "
                    "full or file)",
                    init.kind));
  }
  const std::string& k = init.kind;
  for (const auto& [name, value] : init.args.items()) {
    // Captured by an init-capture: clang before 16 cannot capture a structured binding.
    auto arg = std::find_if(spec->args.begin(), spec->args.end(),
                            [&n = name](const auto& a) { return n == a.first; });
    if (arg == spec->args.end()) {
      std::vector<std::string> names;
      for (const auto& a : spec->args) names.emplace_back(a.first);
      throw Error(fmt::format("{}: unknown attribute '{}' (takes {})", k, name,
                              names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    const AttrKind got = attr_kind_of(value);
    const bool ok =
        got == arg->second || (arg->second == AttrKind::kFloat && got == AttrKind::kInt);
    if (!ok) {
      throw Error(fmt::format("{}: attribute '{}' must be {}, got {}", k, name,
                              attr_kind_name(arg->second), attr_kind_name(got)));
    }
    if (got == AttrKind::kFloat && !std::isfinite(std::get<double>(value))) {
      throw Error(fmt::format("{}: attribute '{}' must be finite, got {}", k, name,
                              std::get<double>(value)));
    }
  }
  for (const char* r : spec->required) {
    if (!init.args.has(r)) throw Error(fmt::format("{}: attribute '{}' is required", k, r));
  }
  if (k == "randn" && init.args.get_float_or("std", 1.0) < 0) {
    throw Error(fmt::format("randn: std must be >= 0, got {}", init.args.get_float("std")));
  }
  if (k == "uniform" && init.args.get_float_or("low", 0.0) > init.args.get_float_or("high", 1.0)) {
    throw Error(fmt::format("uniform: low {} is above high {}", init.args.get_float_or("low", 0.0),
                            init.args.get_float_or("high", 1.0)));
  }
  if (k == "randint") {
    const int64_t low = init.args.get_int_or("low", 0), high = init.args.get_int("high");
    if (high <= low) throw Error(fmt::format("randint: empty range [{}, {})", low, high));
    if (is_integral(type.dtype)) {
      const auto [lo, hi] = integer_range(type.dtype);
      if (low < lo || high - 1 > hi) {
        throw Error(fmt::format("randint: range [{}, {}) does not fit {} ([{}, {}])", low, high,
                                dtype_name(type.dtype), lo, hi));
      }
    }
  }
}

namespace {
std::filesystem::path side_file_path(const Initializer& init, const std::filesystem::path& base) {
  std::filesystem::path p = init.args.get_string("path");
  return p.is_absolute() ? p : base / p;
}
}  // namespace

void check_side_files(const Graph& g) {
  std::vector<std::pair<ValueId, const char*>> bound;
  for (ValueId id : g.params()) bound.emplace_back(id, "parameter");
  for (ValueId id : g.inputs()) bound.emplace_back(id, "input");
  for (const auto& [id, role] : bound) {
    const Value& v = g.value(id);
    if (v.data.defined() || v.init.kind != "file") continue;
    const std::filesystem::path p = side_file_path(v.init, g.base_dir());
    std::error_code ec;
    const auto st = std::filesystem::status(p, ec);
    std::string problem;
    if (ec || !std::filesystem::exists(st)) {
      problem = "does not exist";
    } else if (!std::filesystem::is_regular_file(st)) {
      problem = "is not a regular file";
    } else {
      const auto size = std::filesystem::file_size(p, ec);
      const auto need = static_cast<uintmax_t>(v.type.numel()) * dtype_size(v.type.dtype);
      if (!ec && size != need) {
        problem = fmt::format("holds {} bytes, {} needs {}", size, v.type.str(), need);
      }
    }
    if (!problem.empty()) {
      throw Error(fmt::format("{}{} %{}: {}: {}", g.where(id), role, v.name, p.string(), problem));
    }
  }
}

namespace {
Tensor read_side_file(const std::filesystem::path& path, const TensorType& type) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open parameter data file", path.string()));
  Tensor t = Tensor::empty(type.dtype, type.shape);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  if (size != t.nbytes()) {
    throw Error(fmt::format("{}: holds {} bytes, {} needs {}", path.string(), size, type.str(),
                            t.nbytes()));
  }
  in.seekg(0);
  in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  return t;
}
}  // namespace

Tensor materialize(const Initializer& init, const TensorType& type,
                   const std::filesystem::path& base_dir, uint64_t default_seed) {
  const auto seed =
      static_cast<uint64_t>(init.args.get_int_or("seed", static_cast<int64_t>(default_seed)));
  const std::string& k = init.kind;
  if (k == "file") return read_side_file(side_file_path(init, base_dir), type);
  if (k == "zeros") return Tensor::zeros(type.dtype, type.shape);
  if (k == "ones") return Tensor::full(type.dtype, type.shape, 1.0);
  if (k == "full") return Tensor::full(type.dtype, type.shape, init.args.get_float("value"));
  Tensor t = Tensor::empty(type.dtype, type.shape);
  if (k == "randn") {
    fill_randn(t, seed, init.args.get_float_or("mean", 0.0), init.args.get_float_or("std", 1.0));
  } else if (k == "uniform") {
    fill_uniform(t, seed, init.args.get_float_or("low", 0.0), init.args.get_float_or("high", 1.0));
  } else if (k == "randint") {
    fill_randint(t, seed, init.args.get_int_or("low", 0), init.args.get_int("high"));
  } else {
    throw Error(
        fmt::format("unknown initializer '{}' (expected randn, uniform, randint, zeros, ones, full "
                    "or file)",
                    k));
  }
  return t;
}

void check_value_ids(const Graph& g, std::span<const ValueId> ids, std::string_view what) {
  for (ValueId v : ids) {
    if (v < 0 || static_cast<size_t>(v) >= g.values().size()) {
      throw Error(fmt::format("{}{}value id {} is not a value of graph {} (ids 0 to {})", what,
                              what.empty() ? "" : ": ", v, g.name(),
                              static_cast<int64_t>(g.values().size()) - 1));
    }
  }
}

void check_inputs(const Graph& g, std::span<const Tensor> inputs) {
  if (inputs.size() != g.inputs().size()) {
    throw Error(fmt::format("graph {} takes {} inputs, got {}", g.name(), g.inputs().size(),
                            inputs.size()));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    const TensorType got{inputs[k].dtype(), inputs[k].shape()};
    if (got != v.type)
      throw Error(fmt::format("input %{} must be {}, got {}", v.name, v.type.str(), got.str()));
  }
}

Tensor materialize_param(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  if (v.data.defined()) return v.data;
  if (v.init.empty()) {
    throw Error(fmt::format("{}parameter %{} has no initializer", g.where(id), v.name));
  }
  try {
    return materialize(v.init, v.type, g.base_dir(), 0);
  } catch (const Error& e) {
    throw Error(fmt::format("{}parameter %{}: {}", g.where(id), v.name, e.what()));
  }
}

std::vector<Tensor> make_inputs(const Graph& g, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    const uint64_t stream = derive_seed(seed, k);
    Initializer recipe = v.init;
    if (recipe.empty()) {
      if (is_floating(v.type.dtype)) {
        recipe = {"randn", {}};
      } else if (v.type.dtype == DType::kBool) {
        recipe = {"randint", {{"low", int64_t{0}}, {"high", int64_t{2}}}};
      } else if (v.type.dtype == DType::kU8) {
        recipe = {"randint", {{"low", int64_t{0}}, {"high", int64_t{256}}}};
      } else {
        recipe = {"randint", {{"low", int64_t{-100}}, {"high", int64_t{100}}}};
      }
    }
    recipe.args.set("seed", static_cast<int64_t>(
                                stream ^ static_cast<uint64_t>(recipe.args.get_int_or("seed", 0))));
    try {
      inputs.push_back(materialize(recipe, v.type, g.base_dir(), stream));
    } catch (const Error& e) {
      throw Error(fmt::format("{}input %{}: {}", g.where(g.inputs()[k]), v.name, e.what()));
    }
  }
  return inputs;
}

void reseed_params(Graph& g, uint64_t seed) {
  if (seed == 0) return;
  // Streams apart from make_inputs' (which uses 0, 1, ... for the inputs).
  constexpr uint64_t kParamStreams = uint64_t{1} << 40;
  for (size_t k = 0; k < g.params().size(); ++k) {
    Value& v = g.mutable_value(g.params()[k]);
    if (v.data.defined() || v.init.empty()) continue;
    const RecipeSpec* spec = find_recipe(v.init.kind);
    const bool seeded =
        spec != nullptr && std::any_of(spec->args.begin(), spec->args.end(), [](const auto& a) {
          return std::string_view(a.first) == "seed";
        });
    if (!seeded) continue;
    const uint64_t own = static_cast<uint64_t>(v.init.args.get_int_or("seed", 0));
    v.init.args.set("seed", static_cast<int64_t>(derive_seed(seed, kParamStreams + k) ^ own));
  }
}

}  // namespace crucible
