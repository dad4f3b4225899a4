// A small layer vocabulary over the Graph builder (torch.nn names: linear, conv2d, batch_norm ...)
// so model files read like their PyTorch definitions; parameters get deterministic recipes.
#pragma once

#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::models {

class NetBuilder {
 public:
  explicit NetBuilder(std::string graph_name) : g_(std::move(graph_name)) {}

  // Finishes the graph with these outputs and verifies it.
  Graph finish(std::vector<ValueId> outputs);

  // Dotted PyTorch-style names ("layer1.0.conv1.weight"): a Scope appends a component for its
  // lifetime.
  class Scope {
   public:
    Scope(NetBuilder& b, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    NetBuilder& b_;
    size_t prev_;
  };
  Scope scope(const std::string& name) { return Scope(*this, name); }
  Scope scope(int64_t index) { return Scope(*this, std::to_string(index)); }

  ValueId input(const std::string& name, DType dtype, Shape shape, Initializer recipe = {});

  // Parameters, named <scope>.<leaf>; each random one draws the next seed of the model.
  ValueId normal_param(const std::string& leaf, Shape shape, double std);
  ValueId uniform_param(const std::string& leaf, Shape shape, double low, double high);
  ValueId const_param(const std::string& leaf, Shape shape, double value);

  // Any registered op; the result is named <scope>.<leaf> (made unique), or gets a fresh name.
  ValueId op(const std::string& name, std::vector<ValueId> operands, Attrs attrs = {},
             const std::string& leaf = "");
  const Shape& shape(ValueId v) const { return g_.value(v).type.shape; }
  DType dtype(ValueId v) const { return g_.value(v).type.dtype; }

  // Pointwise and shape helpers.
  ValueId add(ValueId a, ValueId b) { return op("add", {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op("mul", {a, b}); }
  ValueId relu(ValueId x) { return op("relu", {x}); }
  ValueId scalar(double value);  // a 0-d f32 constant node
  ValueId reshape(ValueId x, std::vector<int64_t> shape) {
    return op("reshape", {x}, {{"shape", std::move(shape)}});
  }
  ValueId permute(ValueId x, std::vector<int64_t> dims) {
    return op("permute", {x}, {{"dims", std::move(dims)}});
  }
  ValueId transpose(ValueId x, int64_t d0, int64_t d1) {
    return op("transpose", {x}, {{"dim0", d0}, {"dim1", d1}});
  }
  ValueId slice(ValueId x, int64_t dim, int64_t start, int64_t end) {
    return op("slice", {x}, {{"dim", dim}, {"start", start}, {"end", end}});
  }
  ValueId cat(std::vector<ValueId> xs, int64_t dim) {
    return op("cat", std::move(xs), {{"dim", dim}});
  }

  // Layers. Weight initialisation follows the model families' own recipes: `std` > 0 draws
  // N(0, std) weights and zero biases (BERT, GPT-2); `std` == 0 is PyTorch's nn.Linear default,
  // U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  ValueId linear(ValueId x, int64_t in, int64_t out, bool bias, double std = 0.0,
                 const std::string& name = "");
  ValueId layer_norm(ValueId x, int64_t dim, double eps, const std::string& name = "");
  ValueId embedding(ValueId ids, int64_t num, int64_t dim, double std, const std::string& name);
  // nn.Conv2d with kaiming-normal (relu gain) weights over fan_out, as torchvision's ResNet and
  // MobileNetV2 draw them, or over fan_in (DenseNet's choice, which keeps the variance of its
  // growing concatenations from exploding layer after layer).
  enum class Fan { kOut, kIn };
  ValueId conv2d(ValueId x, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                 int64_t padding, int64_t groups = 1, bool bias = false,
                 const std::string& name = "conv", Fan fan = Fan::kOut);
  // nn.BatchNorm2d in inference form. Its affine weights and running statistics are drawn near
  // torchvision's (1, 0, 0, 1) defaults, so a wrong mean, variance or eps changes the values.
  ValueId batch_norm(ValueId x, int64_t channels, const std::string& name = "bn");

 private:
  std::string scoped(const std::string& leaf) const;
  std::string unique(const std::string& name);
  Initializer seeded(std::string kind, Attrs args);

  Graph g_;
  std::string scope_;
  int64_t next_seed_ = 1;
};

}  // namespace crucible::models
