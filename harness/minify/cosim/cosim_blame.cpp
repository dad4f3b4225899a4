// The cosim job's blame (see cosim_blame.h): global divergence first, then the node's own op
// rerun on the backend's operands, by eager's kernels in f32 and in f64.
#include "cosim_blame.h"

#include "candidate.h"
#include "crucible/ir/transforms.h"
#include "crucible/ops/interpreter.h"

namespace crucible::minify {

namespace {

// Whether node `k`'s backend value is right on the backend's own values of its operands.
bool right_on_its_operands(const Graph& g, int k, const Recording& on_backend,
                           const Tensor& backend_value, const AccuracyOptions& opts) {
  const Candidate one = cut(g, on_backend, {k});  // one node: its value is the one output
  const Tensor e = Interpreter(one.graph).run(one.inputs).at(0);
  const Tensor f = Interpreter(widen_to_f64(one.graph)).run(widen_inputs_to_f64(one.inputs)).at(0);
  return compare_output(backend_value, e, f, opts).passed;
}

}  // namespace

std::string blame_node(const Graph& g, const std::vector<Tensor>& inputs, const NodeValues& values,
                       const AccuracyOptions& opts) {
  // What the backend computed for every value: the inputs as given, each node its own result.
  Recording on_backend(g.values().size());
  for (size_t k = 0; k < g.inputs().size(); ++k)
    on_backend[static_cast<size_t>(g.inputs()[k])] = inputs.at(k);
  for (size_t k = 0; k < g.nodes().size(); ++k)
    on_backend[static_cast<size_t>(g.nodes()[k].output)] = values.backend.at(k);
  std::string first;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    if (compare_output(values.backend.at(k), values.eager.at(k), values.fp64.at(k), opts).passed)
      continue;
    const std::string name = g.value(g.nodes()[k].output).name;
    if (first.empty()) first = name;
    if (!right_on_its_operands(g, static_cast<int>(k), on_backend, values.backend[k], opts))
      return name;
  }
  return first;
}

}  // namespace crucible::minify
