// The built-in model zoo: transformer, vision and MLP models built in code with deterministic
// parameter recipes, each in a full and a small (CI-sized) variant, plus graph statistics.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"
#include "crucible/ir/graph_cost.h"

namespace crucible::models {

enum class Variant { kFull, kSmall };
// "full" or "small"; throws Error for anything else.
Variant parse_variant(const std::string& text);
const char* variant_name(Variant v);

struct BuildOptions {
  Variant variant = Variant::kFull;
  int64_t batch_size = 0;  // 0: the model's default for the variant
  // Vision models: the input images' side (0: the variant's, 224 or 32). build_model refuses it
  // for the other models.
  int64_t image_size = 0;
  int64_t image_side(int64_t variant_side) const {
    return image_size > 0 ? image_size : variant_side;
  }
};

struct ModelSpec {
  std::string name;   // "resnet18"
  std::string suite;  // "vision"
  std::string summary;
  int64_t full_batch = 1;
  int64_t small_batch = 1;
  double tolerance = 1e-4;
  // A training step's batch in the small variant (0: small_batch). Batch norm normalizes by the
  // batch's statistics there: at 32x32 the last stage is 1x1, and 2 images would give each channel
  // 2 values, whose normalization is ill-conditioned enough that no two f32 computations agree.
  int64_t small_train_batch = 0;
  std::function<Graph(const BuildOptions&)> build;

  int64_t default_batch(Variant v) const { return v == Variant::kFull ? full_batch : small_batch; }
  int64_t default_train_batch(Variant v) const {
    return v == Variant::kSmall && small_train_batch > 0 ? small_train_batch : default_batch(v);
  }
};

// Every built-in model, in suite order (transformer, vision, mlp).
const std::vector<ModelSpec>& model_zoo();
// The model named `name`; throws Error listing the known names.
const ModelSpec& find_model(const std::string& name);
// Builds the model's graph for the options (batch 0 picks the variant's default).
Graph build_model(const ModelSpec& spec, BuildOptions options);

struct GraphStats {
  int64_t trainable_params = 0;  // parameter elements, batch-norm running statistics excluded
  int64_t buffer_params = 0;     // batch-norm running mean/var elements
  int64_t nodes = 0;
  GraphCost cost;  // FLOPs, multiply-adds and bytes, from the ops' cost rules
};
// Parameter counts follow PyTorch's `sum(p.numel() for p in model.parameters())`: a parameter that
// only ever feeds batch_norm's running_mean/running_var operands is a buffer, not a parameter.
GraphStats graph_stats(const Graph& g);

}  // namespace crucible::models
