// An out-of-tree backend for the install test: runs the graph through the registry's kernels and
// doubles every floating output, so the test can tell its results from eager's.
#include "crucible/ir/op_registry.h"
#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

class DoublingExecutable final : public plugin::Executable {
 public:
  explicit DoublingExecutable(const Graph& g) : graph_(g) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<Tensor> env(graph_.values().size());
    for (size_t k = 0; k < inputs.size(); ++k) env[graph_.inputs()[k]] = inputs[k];
    for (ValueId p : graph_.params()) env[p] = materialize_param(graph_, p);
    for (const Node& n : graph_.nodes()) {
      std::vector<Tensor> ops;
      for (ValueId v : n.operands) ops.push_back(env[v]);
      env[n.output] = run_op(n.op, ops, n.attrs);
    }
    std::vector<Tensor> out;
    for (ValueId v : graph_.outputs())
      out.push_back(run_op("add", std::vector<Tensor>{env[v], env[v]}));
    return out;
  }
  // intermediates() is not overridden: the default throws IntermediatesUnsupported, the contract
  // for a backend that cannot return values inside its graph (never an empty or made-up result).

 private:
  Graph graph_;
};

class DoublingBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"doubling", "1.0", plugin::kAbiVersion}; }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options&) override {
    return std::make_unique<DoublingExecutable>(g);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<DoublingBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
