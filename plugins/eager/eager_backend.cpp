// The eager backend: the reference interpreter (crucible/ops/interpreter.h), which runs a graph op
// by op as PyTorch's eager mode would, freeing each intermediate after its last use.
#include <fmt/format.h>

#include "crucible/core/openmp_threads.h"
#include "crucible/ir/graph_cost.h"
#include "crucible/ops/interpreter.h"
#include "crucible/plugin_api.h"

namespace crucible::eager {

namespace {

using plugin::KernelStat;

// The reference interpreter, timing each node when profiling is on (per op kind).
class ProfiledInterpreter final : public Interpreter {
 public:
  ProfiledInterpreter(const Graph& g, bool profile) : Interpreter(g), profile_on_(profile) {
    if (profile_on_) {
      for (int i = 0; i < static_cast<int>(graph().nodes().size()); ++i) {
        const Node& n = graph().nodes()[static_cast<size_t>(i)];
        stat_of_node_.push_back(profile_.declare("eager::" + n.op));
        const OpCost c = node_cost(graph(), i);
        cost_of_node_.push_back({c.flops, c.bytes()});
      }
    }
  }
  std::vector<KernelStat> stats() const { return profile_.stats(); }

 protected:
  Tensor run_node(int node, std::span<const Tensor> operands) override {
    if (!profile_on_) return Interpreter::run_node(node, operands);
    const auto t0 = plugin::ProfileRecorder::Clock::now();
    Tensor out = Interpreter::run_node(node, operands);
    profile_.record(stat_of_node_[static_cast<size_t>(node)], t0,
                    cost_of_node_[static_cast<size_t>(node)]);
    return out;
  }

 private:
  bool profile_on_;
  plugin::ProfileRecorder profile_;
  std::vector<size_t> stat_of_node_;
  std::vector<plugin::KernelCost> cost_of_node_;  // one op's reads and writes, views free
};

class EagerExecutable final : public plugin::Executable {
 public:
  EagerExecutable(const Graph& g, const plugin::Options& opts)
      : interpreter_(g, opts.profile), threads_(opts.threads) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    if (threads_ > 0) use_openmp_threads(threads_);
    return interpreter_.run(inputs);
  }

  std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                    std::span<const ValueId> values) override {
    if (threads_ > 0) use_openmp_threads(threads_);
    try {
      return interpreter_.values(inputs, values);
    } catch (const Error& e) {
      throw Error(fmt::format("intermediates: {}", e.what()));
    }
  }

  std::vector<KernelStat> profile() const override { return interpreter_.stats(); }

 private:
  ProfiledInterpreter interpreter_;
  int threads_;
};

class EagerBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"eager", "0.1.0", plugin::kAbiVersion}; }

  std::unique_ptr<plugin::Executable> compile(const Graph& graph,
                                              const plugin::Options& options) override {
    for (const auto& [key, value] : options.config) {
      throw plugin::OptionError(fmt::format("eager: unknown option -c {}={}", key, value));
    }
    return std::make_unique<EagerExecutable>(graph, options);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<EagerBackend>(); }

}  // namespace

}  // namespace crucible::eager

CRUCIBLE_EXPORT_BACKEND(crucible::eager::create)
