// The eager backend: runs a graph op by op through the registry's reference kernels, as PyTorch's
// eager mode would, freeing each intermediate after its last use. Profiling is per op kind.
#include <fmt/format.h>
#include <omp.h>

#include <unordered_map>
#include <unordered_set>

#include "crucible/ir/op_registry.h"
#include "crucible/plugin_api.h"

namespace crucible::eager {

namespace {

using plugin::KernelStat;

class EagerExecutable final : public plugin::Executable {
 public:
  EagerExecutable(const Graph& g, const plugin::Options& opts) : graph_(g), opts_(opts) {
    verify(graph_);
    for (const Node& n : graph_.nodes()) kernels_.push_back(&OpRegistry::global().get(n.op).kernel);
    for (ValueId id : graph_.params()) params_.emplace(id, materialize_param(graph_, id));
    // last_use[v] = index of the last node reading v; graph outputs are never freed.
    last_use_.assign(graph_.values().size(), -1);
    for (size_t i = 0; i < graph_.nodes().size(); ++i) {
      for (ValueId v : graph_.nodes()[i].operands) last_use_[v] = static_cast<int>(i);
    }
    for (ValueId v : graph_.outputs()) last_use_[v] = static_cast<int>(graph_.nodes().size());
    if (opts_.profile) {
      for (const Node& n : graph_.nodes())
        stat_of_node_.push_back(profile_.declare("eager::" + n.op));
    }
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<Tensor> env = execute(inputs, {});
    std::vector<Tensor> out;
    for (ValueId v : graph_.outputs()) out.push_back(env[v]);
    return out;
  }

  std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                    std::span<const ValueId> values) override {
    std::unordered_set<ValueId> keep(values.begin(), values.end());
    std::vector<Tensor> env = execute(inputs, keep);
    std::vector<Tensor> out;
    for (ValueId v : values) {
      if (v < 0 || static_cast<size_t>(v) >= env.size() || !env[v].defined()) {
        throw Error(
            fmt::format("intermediates: value id {} is not a value of graph {}", v, graph_.name()));
      }
      out.push_back(env[v]);
    }
    return out;
  }

  std::vector<KernelStat> profile() const override { return profile_.stats(); }

 private:
  std::vector<Tensor> execute(std::span<const Tensor> inputs,
                              const std::unordered_set<ValueId>& keep) {
    plugin::check_inputs(graph_, inputs);
    if (opts_.threads > 0) omp_set_num_threads(opts_.threads);
    std::vector<Tensor> env(graph_.values().size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      env[graph_.inputs()[k]] = inputs[k];
    }
    for (const auto& [id, t] : params_) env[id] = t;
    std::vector<Tensor> operands;
    for (size_t i = 0; i < graph_.nodes().size(); ++i) {
      const Node& n = graph_.nodes()[i];
      operands.clear();
      for (ValueId v : n.operands) operands.push_back(env[v]);
      if (opts_.profile) {
        const auto t0 = plugin::ProfileRecorder::Clock::now();
        env[n.output] = (*kernels_[i])(operands, n.attrs);
        profile_.record(stat_of_node_[i], t0);
      } else {
        env[n.output] = (*kernels_[i])(operands, n.attrs);
      }
      // Drop operands whose last reader was this node, so peak memory matches a real eager run.
      for (ValueId v : n.operands) {
        if (last_use_[v] == static_cast<int>(i) && graph_.value(v).kind == ValueKind::kNode &&
            !keep.contains(v)) {
          env[v] = Tensor();
        }
      }
    }
    return env;
  }

  Graph graph_;
  plugin::Options opts_;
  std::vector<const Kernel*> kernels_;
  std::unordered_map<ValueId, Tensor> params_;
  std::vector<int> last_use_;
  plugin::ProfileRecorder profile_;
  std::vector<size_t> stat_of_node_;
};

class EagerBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"eager", "0.1.0", plugin::kAbiVersion}; }

  std::unique_ptr<plugin::Executable> compile(const Graph& graph,
                                              const plugin::Options& options) override {
    for (const auto& [key, value] : options.config) {
      throw plugin::CompileError(fmt::format("eager: unknown option -c {}={}", key, value));
    }
    return std::make_unique<EagerExecutable>(graph, options);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<EagerBackend>(); }

}  // namespace

}  // namespace crucible::eager

CRUCIBLE_EXPORT_BACKEND(crucible::eager::create)
