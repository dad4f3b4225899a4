// Under --mode training: a model becomes its training graphs (crucible/ops/training.h), written
// beside the run's other graphs, so every worker, the minifier and a repro read a plain .graph.
#pragma once

#include <filesystem>

#include "crucible/ir/graph.h"
#include "crucible/ops/training.h"
#include "suite.h"

namespace crucible {

// What a model's training results are named: "<model>.train", a series of its own beside the
// model's inference results.
std::string training_name(const std::string& model);

// A training step's accuracy tolerance unless the manifest gives one: PyTorch's harness judges
// timm and Hugging Face models' training at 1e-2 (2e-2 for some), against 1e-3 for inference,
// as a gradient sums what a forward only passes on. Here atol is relative to the step's scale
// (1e-2 of the root mean square of all its outputs, AccuracyOptions::scale): a gradient of 1e-3
// everywhere, held to an absolute 1e-2, would let a backward that doubles it pass.
inline constexpr double kTrainingTolerance = 1e-2;

// Judges `m` by the training rule: its manifest's train_tolerance, else its manifest tolerance,
// else kTrainingTolerance or the model's own when larger, scaled to the step's outputs. For a
// training step however it came: a suite model under --mode training, or a --graph file that
// holds one (crucible export --train-steps N), which --mode training would judge so.
void use_training_rule(ModelEntry& m);

// When `m`'s graph file holds a training step (gradient sets: crucible export --train-steps N,
// given as --graph or a manifest's graph=), judges it by use_training_rule and skips its
// training entry, since a step is not differentiated again. A file that does not load is left to
// the run, which records it as fail_to_load.
void judge_step_file_as_training(ModelEntry& m);

// `m` as a training model: named training_name(m.name), its manifest's train_* keys in force
// (batch size, skip, xfail), judged by use_training_rule. Idempotent.
void as_training_entry(ModelEntry& m);

// The run's models as its mode wants them: under training each becomes its training entry; under
// `all` each is followed by its training entry (inference and training in one run).
std::vector<ModelEntry> with_training_entries(std::vector<ModelEntry> models, bool inference,
                                              bool training);

// Where write_training_graphs puts the training graph of `m` (its name already training_name's).
std::filesystem::path training_graph_path(const std::filesystem::path& dir, const ModelEntry& m);

// Writes `forward`'s training graph of options.steps steps (judged for accuracy) and of one step
// (timed) as <dir>/<suite>.<m.name>.graph and .step.graph, and points m.graph and
// m.step_graph at them; file(path=...) recipes become absolute, so the graphs read from anywhere.
// Throws Error (a GraphError naming the op without a gradient rule, say) when the model cannot
// train.
void write_training_graphs(ModelEntry& m, const Graph& forward, const TrainingOptions& options,
                           const std::filesystem::path& dir);

}  // namespace crucible
