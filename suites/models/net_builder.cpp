// NetBuilder: scoped names, seeded parameter recipes and the torch.nn-style layers the model files
// are written in (see net_builder.h).
#include "net_builder.h"

#include <fmt/format.h>

#include <cmath>

namespace crucible::models {

NetBuilder::Scope::Scope(NetBuilder& b, const std::string& name) : b_(b), prev_(b.scope_.size()) {
  b_.scope_ += b_.scope_.empty() ? name : "." + name;
}
NetBuilder::Scope::~Scope() { b_.scope_.resize(prev_); }

Graph NetBuilder::finish(std::vector<ValueId> outputs) {
  g_.set_outputs(std::move(outputs));
  verify(g_);
  return std::move(g_);
}

std::string NetBuilder::scoped(const std::string& leaf) const {
  if (scope_.empty()) return leaf;
  return leaf.empty() ? scope_ : scope_ + "." + leaf;
}

std::string NetBuilder::unique(const std::string& name) {
  if (!g_.find_value(name)) return name;
  for (int k = 1;; ++k) {
    std::string candidate = fmt::format("{}_{}", name, k);
    if (!g_.find_value(candidate)) return candidate;
  }
}

Initializer NetBuilder::seeded(std::string kind, Attrs args) {
  Attrs with_seed{{"seed", next_seed_++}};
  for (const auto& [k, v] : args.items()) with_seed.set(k, v);
  return Initializer{std::move(kind), std::move(with_seed)};
}

ValueId NetBuilder::input(const std::string& name, DType dtype, Shape shape, Initializer recipe) {
  return g_.add_input(name, TensorType{dtype, std::move(shape)}, std::move(recipe));
}

ValueId NetBuilder::normal_param(const std::string& leaf, Shape shape, double std) {
  return g_.add_param(unique(scoped(leaf)), TensorType{DType::kF32, std::move(shape)},
                      seeded("randn", {{"std", std}}));
}

ValueId NetBuilder::uniform_param(const std::string& leaf, Shape shape, double low, double high) {
  return g_.add_param(unique(scoped(leaf)), TensorType{DType::kF32, std::move(shape)},
                      seeded("uniform", {{"low", low}, {"high", high}}));
}

ValueId NetBuilder::const_param(const std::string& leaf, Shape shape, double value) {
  Initializer init = value == 0.0   ? Initializer{"zeros", {}}
                     : value == 1.0 ? Initializer{"ones", {}}
                                    : Initializer{"full", {{"value", value}}};
  return g_.add_param(unique(scoped(leaf)), TensorType{DType::kF32, std::move(shape)},
                      std::move(init));
}

ValueId NetBuilder::op(const std::string& name, std::vector<ValueId> operands, Attrs attrs,
                       const std::string& leaf) {
  std::string value_name = leaf.empty() && scope_.empty() ? "" : unique(scoped(leaf));
  return g_.add_node(name, std::move(operands), std::move(attrs), std::move(value_name));
}

ValueId NetBuilder::scalar(double value) {
  return g_.add_node("full", {}, {{"shape", std::vector<int64_t>{}}, {"value", value}});
}

ValueId NetBuilder::linear(ValueId x, int64_t in, int64_t out, bool bias, double std,
                           const std::string& name) {
  Scope s(*this, name);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  ValueId w = std > 0 ? normal_param("weight", {out, in}, std)
                      : uniform_param("weight", {out, in}, -bound, bound);
  if (!bias) return op("linear", {x, w});
  ValueId b =
      std > 0 ? const_param("bias", {out}, 0.0) : uniform_param("bias", {out}, -bound, bound);
  return op("linear", {x, w, b});
}

ValueId NetBuilder::layer_norm(ValueId x, int64_t dim, double eps, const std::string& name) {
  Scope s(*this, name);
  ValueId w = const_param("weight", {dim}, 1.0);
  ValueId b = const_param("bias", {dim}, 0.0);
  return op("layer_norm", {x, w, b},
            {{"normalized_shape", std::vector<int64_t>{dim}}, {"eps", eps}});
}

ValueId NetBuilder::embedding(ValueId ids, int64_t num, int64_t dim, double std,
                              const std::string& name) {
  Scope s(*this, name);
  ValueId w = normal_param("weight", {num, dim}, std);
  return op("embedding", {w, ids});
}

ValueId NetBuilder::conv2d(ValueId x, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                           int64_t padding, int64_t groups, bool bias, const std::string& name,
                           Fan fan) {
  Scope s(*this, name);
  const double fan_count =
      static_cast<double>((fan == Fan::kOut ? out / groups : in / groups) * kernel * kernel);
  ValueId w =
      normal_param("weight", {out, in / groups, kernel, kernel}, std::sqrt(2.0 / fan_count));
  std::vector<ValueId> operands{x, w};
  if (bias) operands.push_back(const_param("bias", {out}, 0.0));
  return op("conv2d", operands,
            {{"stride", std::vector<int64_t>{stride, stride}},
             {"padding", std::vector<int64_t>{padding, padding}},
             {"groups", groups}});
}

ValueId NetBuilder::batch_norm(ValueId x, int64_t channels, const std::string& name) {
  Scope s(*this, name);
  ValueId w = uniform_param("weight", {channels}, 0.8, 1.2);
  ValueId b = uniform_param("bias", {channels}, -0.1, 0.1);
  ValueId mean = uniform_param("running_mean", {channels}, -0.1, 0.1);
  ValueId var = uniform_param("running_var", {channels}, 0.8, 1.2);
  return op("batch_norm", {x, w, b, mean, var}, {{"eps", 1e-5}});
}

}  // namespace crucible::models
