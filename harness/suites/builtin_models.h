// Built-in zoo models in a run: each selected `builtin=` entry is built for the run's variant and
// batch size and written as a .graph file into the run's output, which the workers then load.
#pragma once

#include <filesystem>
#include <vector>

#include "crucible/ir/graph.h"
#include "crucible/models/model_zoo.h"
#include "suite.h"

namespace crucible {

struct BuiltGraph {
  size_t model_index;  // into the selected models
  Graph graph;
};

// Builds the graphs of the builtin entries; sets each entry's batch_size to the one used
// (`batch_override` > the manifest's batch_size > the model's default, its training default for
// a training entry). Throws Error on a bad request, before anything is written.
std::vector<BuiltGraph> build_builtin_models(std::vector<ModelEntry>& models,
                                             models::Variant variant, int64_t batch_override);
// Writes each built graph to <dir>/<suite>.<model>.graph (a training entry's forward to
// <suite>.<model>.train.forward.graph: its .graph is the training step's) and points its entry
// there.
void write_builtin_models(const std::vector<BuiltGraph>& built, std::vector<ModelEntry>& models,
                          const std::filesystem::path& dir);

}  // namespace crucible
