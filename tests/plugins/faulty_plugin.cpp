// Test backend: runs graphs op by op like eager, but on demand misbehaves the ways real compiled
// backends do, so the harness's isolation and status mapping can be tested end to end.

// -c fault.<graph name>=segv|abort|hang|oom|compile_error|run_error|wrong|sleep_ms:N|reserve_mb:N
// (reserve_mb: N MB of address space allocated and never touched, as stacks and arenas are)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "crucible/ir/op_registry.h"
#include "crucible/plugin_api.h"

namespace {

using namespace crucible;

class FaultyExecutable final : public plugin::Executable {
 public:
  FaultyExecutable(const Graph& g, std::string fault) : graph_(g), fault_(std::move(fault)) {
    for (ValueId id : graph_.params()) params_.emplace_back(id, materialize_param(graph_, id));
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    if (fault_ == "segv") {
      ::raise(SIGSEGV);
    } else if (fault_ == "abort") {
      std::abort();
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_ == "oom") {
      std::vector<char*> hog;
      for (;;) {
        char* p = new char[64 << 20];
        std::memset(p, 1, 64 << 20);  // touch it: resident, not just reserved
        hog.push_back(p);
      }
    } else if (fault_ == "run_error") {
      throw Error("faulty: kernel launch failed");
    } else if (fault_.rfind("reserve_mb:", 0) == 0) {
      reserved_.reset(new char[static_cast<size_t>(std::stoi(fault_.substr(11))) << 20]);
    } else if (fault_.rfind("sleep_ms:", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(fault_.substr(9))));
    }
    std::vector<Tensor> env(graph_.values().size());
    for (size_t k = 0; k < inputs.size(); ++k) env[graph_.inputs()[k]] = inputs[k];
    for (const auto& [id, t] : params_) env[id] = t;
    for (const Node& n : graph_.nodes()) {
      std::vector<Tensor> ops;
      for (ValueId v : n.operands) ops.push_back(env[v]);
      env[n.output] = OpRegistry::global().get(n.op).kernel(ops, n.attrs);
    }
    std::vector<Tensor> out;
    for (ValueId v : graph_.outputs()) out.push_back(env[v].clone());
    if (fault_ == "wrong" && !out.empty() && out[0].numel() > 0) {
      Tensor shifted =
          run_op("add", std::vector<Tensor>{out[0], Tensor::full(out[0].dtype(), {}, 1.0)});
      out[0] = shifted;
    }
    return out;
  }

 private:
  Graph graph_;
  std::string fault_;
  std::vector<std::pair<ValueId, Tensor>> params_;
  std::unique_ptr<char[]> reserved_;
};

class FaultyBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"faulty", "test", plugin::kAbiVersion}; }
  std::unique_ptr<plugin::Executable> compile(const Graph& g, const plugin::Options& o) override {
    std::string fault = o.get("fault." + g.name());
    if (fault == "compile_error")
      throw plugin::CompileError("faulty: cannot lower op 'neg' for u8");
    return std::make_unique<FaultyExecutable>(g, fault);
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<FaultyBackend>(); }

}  // namespace

CRUCIBLE_EXPORT_BACKEND(create)
