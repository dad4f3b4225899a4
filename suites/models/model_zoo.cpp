// The zoo's registry (one line per model, in suite order), variant parsing, and graph statistics:
// PyTorch-style parameter counts and the GEMM/convolution FLOPs of one forward pass.
#include <fmt/format.h>

#include <set>

#include "crucible/core/error.h"
#include "crucible/ops/training.h"
#include "models.h"

namespace crucible::models {

Variant parse_variant(const std::string& text) {
  if (text == "full") return Variant::kFull;
  if (text == "small") return Variant::kSmall;
  throw Error(fmt::format("variant must be full or small, got '{}'", text));
}

const char* variant_name(Variant v) { return v == Variant::kFull ? "full" : "small"; }

const std::vector<ModelSpec>& model_zoo() {
  static const std::vector<ModelSpec> zoo = {
      {"mobilebert", "transformer",
       "MobileBERT for QA: 24 layers, hidden 512, bottleneck 128, NoNorm, ReLU; seq 128", 128, 2,
       1e-4, 0, build_mobilebert},
      {"bert_base", "transformer", "BERT-base encoder stack: 12 layers, hidden 768, GELU; seq 128",
       8, 2, 1e-4, 0, build_bert_base},
      {"gpt2", "transformer",
       "GPT-2 small LM: 12 causal layers, hidden 768, tanh GELU, tied LM head; seq 128", 4, 2, 1e-4,
       0, build_gpt2},
      {"resnet18", "vision", "torchvision ResNet-18, 3x224x224", 16, 2, 1e-4, 16, build_resnet18},
      {"resnet50", "vision", "torchvision ResNet-50 (v1.5), 3x224x224", 8, 2, 1e-4, 16,
       build_resnet50},
      {"mobilenet_v2", "vision", "torchvision MobileNetV2, 3x224x224", 16, 2, 1e-4, 16,
       build_mobilenet_v2},
      {"densenet121", "vision", "torchvision DenseNet-121, 3x224x224", 8, 2, 1e-4, 16,
       build_densenet121},
      {"dlrm", "mlp",
       "DLRM-like: bottom MLP 512-512-64, 8 tables x 1M rows x 64, 100-index bags, dot "
       "interaction, top MLP 1024-1024-1024-1",
       1024, 8, 1e-4, 0, build_dlrm},
      {"mlp", "mlp", "4-layer MLP 1024-4096-4096-4096-1000, ReLU", 512, 16, 1e-4, 0, build_mlp},
  };
  return zoo;
}

const ModelSpec& find_model(const std::string& name) {
  std::vector<std::string> names;
  for (const ModelSpec& m : model_zoo()) {
    if (m.name == name) return m;
    names.push_back(m.name);
  }
  throw Error(fmt::format("no built-in model '{}' (known: {})", name, fmt::join(names, ", ")));
}

Graph build_model(const ModelSpec& spec, BuildOptions options) {
  if (options.batch_size < 0)
    throw Error(fmt::format("batch size must be positive, got {}", options.batch_size));
  if (options.batch_size == 0) options.batch_size = spec.default_batch(options.variant);
  if (options.image_size != 0 && spec.suite != "vision")
    throw Error(
        fmt::format("image_size applies to the vision models; '{}' takes no image", spec.name));
  if (options.image_size != 0 && (options.image_size < 32 || options.image_size > 4096))
    throw Error(
        fmt::format("image_size must be from 32 to 4096 (the last stage downsamples 32x), "
                    "got {}",
                    options.image_size));
  Graph g = spec.build(options);
  g.set_name(spec.name);
  return g;
}

GraphStats graph_stats(const Graph& g) {
  GraphStats st;
  st.nodes = static_cast<int64_t>(g.nodes().size());
  st.cost = graph_cost(g);
  const std::vector<ValueId> trained = trainable_params(g);
  const std::set<ValueId> trainable(trained.begin(), trained.end());
  for (ValueId p : g.params()) {
    // A parameter PyTorch counts that a step does not train: an integer one (none in the zoo).
    const bool counted = trainable.contains(p) || !is_floating(g.value(p).type.dtype);
    (counted ? st.trainable_params : st.buffer_params) += g.value(p).type.numel();
  }
  return st;
}

}  // namespace crucible::models
