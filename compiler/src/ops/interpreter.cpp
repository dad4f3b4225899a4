// The reference interpreter (see interpreter.h).
#include "crucible/ops/interpreter.h"

#include <fmt/format.h>

#include "crucible/core/error.h"
#include "crucible/ir/uses.h"

namespace crucible {

Interpreter::Interpreter(Graph graph) : graph_(std::move(graph)) {
  verify(graph_);
  for (const Node& n : graph_.nodes()) kernels_.push_back(&OpRegistry::global().get(n.op).kernel);
  for (ValueId id : graph_.params()) params_.push_back(materialize_param(graph_, id));
  last_use_ = last_uses(graph_);
}

Tensor Interpreter::run_node(int node, std::span<const Tensor> operands) {
  return (*kernels_[static_cast<size_t>(node)])(operands, graph_.nodes()[node].attrs);
}

std::vector<Tensor> Interpreter::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> env = execute(inputs, last_use_);
  std::vector<Tensor> out;
  for (ValueId v : graph_.outputs()) out.push_back(env[v]);
  return out;
}

std::vector<Tensor> Interpreter::values(std::span<const Tensor> inputs,
                                        std::span<const ValueId> ids) {
  check_value_ids(graph_, ids);
  std::vector<Tensor> env = execute(inputs, last_uses(graph_, ids));
  std::vector<Tensor> out;
  for (ValueId v : ids) out.push_back(env[v]);
  return out;
}

std::vector<Tensor> Interpreter::execute(std::span<const Tensor> inputs,
                                         const std::vector<int>& last_use) {
  check_inputs(graph_, inputs);
  std::vector<Tensor> env(graph_.values().size());
  for (size_t k = 0; k < inputs.size(); ++k) env[graph_.inputs()[k]] = inputs[k];
  for (size_t k = 0; k < params_.size(); ++k) env[graph_.params()[k]] = params_[k];
  std::vector<Tensor> operands;
  for (size_t i = 0; i < graph_.nodes().size(); ++i) {
    const Node& n = graph_.nodes()[i];
    operands.clear();
    for (ValueId v : n.operands) operands.push_back(env[v]);
    env[n.output] = run_node(static_cast<int>(i), operands);
    for (ValueId v : n.operands) {
      if (last_use[v] == static_cast<int>(i) && graph_.value(v).kind == ValueKind::kNode)
        env[v] = Tensor();
    }
  }
  return env;
}

}  // namespace crucible
