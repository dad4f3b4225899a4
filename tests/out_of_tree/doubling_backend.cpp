// An out-of-tree backend for the install test: runs the graph on the installed reference
// interpreter and doubles every output, so the test can tell its results from eager's.
#include "crucible/ir/op_registry.h"
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

class DoublingExecutable final : public plugin::Executable {
 public:
  explicit DoublingExecutable(const Graph& g) : interpreter_(g) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<Tensor> out;
    for (const Tensor& t : interpreter_.run(inputs))
      out.push_back(run_op("add", std::vector<Tensor>{t, t}));
    return out;
  }
  // intermediates() is not overridden: the default throws IntermediatesUnsupported, the contract
  // for a backend that cannot return values inside its graph (never an empty or made-up result).

 private:
  Interpreter interpreter_;  // the installed reference interpreter runs the graph itself
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
