// The reference interpreter: a graph run node by node on the op registry's kernels. The eager
// backend is this loop; any other backend reuses it instead of rewriting it.
#pragma once

#include <span>
#include <vector>

#include "crucible/ir/graph.h"
#include "crucible/ir/op_registry.h"

namespace crucible {

class Interpreter {
 public:
  // Verifies the graph, looks up every node's kernel and materializes every parameter once.
  // Throws GraphError (a malformed graph) or Error (a parameter that cannot be materialized).
  explicit Interpreter(Graph graph);
  virtual ~Interpreter() = default;

  const Graph& graph() const { return graph_; }

  // The graph's outputs for `inputs`. Each intermediate is freed after its last reader, so peak
  // memory is that of an eager run. Throws Error for inputs of the wrong number, dtype or shape.
  std::vector<Tensor> run(std::span<const Tensor> inputs);
  // The values `ids` (any values of the graph, in that order) for `inputs`; throws Error naming an
  // id that is not a value of the graph.
  std::vector<Tensor> values(std::span<const Tensor> inputs, std::span<const ValueId> ids);

 protected:
  // Computes node `node` from its operands with the registry's kernel; override to time or trace
  // each node, or to run some nodes another way.
  virtual Tensor run_node(int node, std::span<const Tensor> operands);

 private:
  // Every value after a run, intermediates freed (left empty) after their last use in `last_use`.
  std::vector<Tensor> execute(std::span<const Tensor> inputs, const std::vector<int>& last_use);

  Graph graph_;
  std::vector<const Kernel*> kernels_;
  std::vector<Tensor> params_;  // per entry of graph_.params()
  std::vector<int> last_use_;   // graph outputs live to the end
};

}  // namespace crucible
