// Builds and writes the built-in models of a run (see builtin_models.h).
#include "builtin_models.h"

#include <fmt/format.h>

#include "crucible/ir/text_format.h"

namespace crucible {

std::vector<BuiltGraph> build_builtin_models(std::vector<ModelEntry>& models,
                                             models::Variant variant, int64_t batch_override) {
  std::vector<BuiltGraph> built;
  for (size_t i = 0; i < models.size(); ++i) {
    ModelEntry& m = models[i];
    if (m.builtin.empty() || !m.skip.empty()) continue;
    const models::ModelSpec& spec = models::find_model(m.builtin);
    if (batch_override > 0) m.batch_size = batch_override;
    if (m.batch_size == 0 && m.training) m.batch_size = spec.default_train_batch(variant);
    models::BuildOptions options{variant, m.batch_size, m.image_size};
    built.push_back({i, models::build_model(spec, options)});
    if (m.batch_size == 0) m.batch_size = spec.default_batch(variant);
  }
  return built;
}

void write_builtin_models(const std::vector<BuiltGraph>& built, std::vector<ModelEntry>& models,
                          const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const BuiltGraph& b : built) {
    ModelEntry& m = models[b.model_index];
    m.graph = std::filesystem::absolute(
        dir / fmt::format("{}.{}{}.graph", m.suite, m.name, m.training ? ".forward" : ""));
    save_graph_file(b.graph, m.graph);
  }
}

}  // namespace crucible
