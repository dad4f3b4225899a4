// Training graphs of a run's models: built from the forward graph, recipes' side files made
// absolute, written atomically where the run keeps its graphs.
#include "training_models.h"

#include <fmt/format.h>

#include <algorithm>

#include "crucible/ir/text_format.h"

namespace crucible {

namespace fs = std::filesystem;

std::string training_name(const std::string& model) { return model + ".train"; }

void as_training_entry(ModelEntry& m) {
  if (m.training) return;
  m.training = true;
  m.name = training_name(m.name);
  // A model skipped for inference has no forward to train; its inference xfail says nothing of
  // its gradients.
  if (m.skip.empty()) m.skip = m.train.skip;
  m.xfail = m.train.xfail;
  if (m.train.batch_size > 0) m.batch_size = m.train.batch_size;
  use_training_rule(m);
}

void use_training_rule(ModelEntry& m) {
  m.scaled_tolerance = true;
  if (m.train.tolerance > 0) {
    m.tolerance = m.train.tolerance;
    m.tolerance_set = true;
  } else if (!m.tolerance_set) {
    m.tolerance = std::max(m.tolerance, kTrainingTolerance);
  }
}

void judge_step_file_as_training(ModelEntry& m) {
  if (m.training || m.graph.empty()) return;
  try {
    if (load_graph_file(m.graph).gradients().empty()) return;
  } catch (const Error&) {
    return;  // the run records it as fail_to_load
  }
  use_training_rule(m);
  if (m.train.skip.empty())
    m.train.skip =
        "its graph is a training step already: its inference results judge it by the "
        "training rule";
}

std::vector<ModelEntry> with_training_entries(std::vector<ModelEntry> models, bool inference,
                                              bool training) {
  if (!training) return models;
  std::vector<ModelEntry> out;
  out.reserve(models.size() * (inference ? 2 : 1));
  for (ModelEntry& m : models) {
    if (inference) out.push_back(m);
    as_training_entry(m);
    out.push_back(std::move(m));
  }
  return out;
}

fs::path training_graph_path(const fs::path& dir, const ModelEntry& m) {
  return fs::absolute(dir / fmt::format("{}.{}.graph", m.suite, m.name));
}

namespace {

// A file(path=...) recipe relative to the forward graph's folder, made absolute.
void absolute_side_files(Graph& g, const fs::path& base) {
  for (size_t v = 0; v < g.values().size(); ++v) {
    Initializer& init = g.mutable_value(static_cast<ValueId>(v)).init;
    if (init.kind != "file" || !init.args.has("path")) continue;
    const fs::path p = init.args.get_string("path");
    if (p.is_relative()) init.args.set("path", (base / p).lexically_normal().string());
  }
}

fs::path write(Graph g, const fs::path& base, const fs::path& path) {
  absolute_side_files(g, base);
  save_graph_file(g, path);
  return fs::absolute(path);
}

}  // namespace

void write_training_graphs(ModelEntry& m, const Graph& forward, const TrainingOptions& options,
                           const fs::path& dir) {
  TrainingOptions one = options;
  one.steps = 1;
  const Graph steps = training_graph(forward, options);
  const Graph step = options.steps == 1 ? steps : training_graph(forward, one);
  fs::create_directories(dir);
  const fs::path path = training_graph_path(dir, m);
  m.graph = write(steps, forward.base_dir(), path);
  m.step_graph = write(step, forward.base_dir(), fs::path(path).replace_extension(".step.graph"));
}

}  // namespace crucible
