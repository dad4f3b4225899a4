// The libtorch backend: PyTorch 1.13 (Debian's libtorch) as a peer in the same run. -c mode=eager
// runs the graph op by op through ATen, timing each op when profiling; -c mode=jit runs it as a
// frozen, inference-optimized TorchScript module (torchscript.h). Built as `libtorch` (eager by
// default) and `libtorch_jit` (jit by default): CRUCIBLE_LIBTORCH_NAME and _MODE say which.
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>

#include "aten_autograd.h"
#include "aten_bridge.h"
#include "aten_ops.h"
#include "blas_cores.h"
#include "blas_probe.h"
#include "clamp_choice.h"
#include "crucible/core/openmp_threads.h"
#include "crucible/ir/uses.h"
#include "crucible/plugin_api.h"
#include "jit_profile.h"
#include "linear_choice.h"
#include "mkldnn_linear.h"
#include "peer_facts.h"
#include "torchscript.h"

namespace crucible::libtorch {

namespace {

using plugin::KernelStat;

// ATen's parallel backend here is OpenMP (at::get_parallel_info), so OpenMP's count is what sets
// its threads (use_openmp_threads: held to what a region can get). at::set_num_threads is not
// called: called before every run, as a first version did, it took resnet18 at batch 1 from 14.6
// to 38.7 ms and slowed the backends timed beside it in the same worker (our eager 11.4 -> 20.4 ms,
// its threads runnable but waiting 89% of the time).
void set_threads(int threads) {
  if (threads > 0) use_openmp_threads(threads);
}

// Runs `f`, turning ATen's errors (a message, then a C++ backtrace) into one crucible line.
template <typename F>
auto aten_call(const char* what, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    msg = msg.substr(0, msg.find('\n'));
    throw Error(fmt::format("libtorch: {}: {}", what, msg));
  }
}

// The version's notes, "; "-separated, an empty one left out.
std::string join_notes(const std::string& a, const std::string& b) {
  return a.empty() ? b : b.empty() ? a : a + "; " + b;
}

std::vector<at::Tensor> aten_params(const Graph& g) {
  std::vector<at::Tensor> out;
  for (ValueId id : g.params()) out.push_back(aten_copy(materialize_param(g, id)));
  return out;
}

std::vector<Tensor> run_scripted(ScriptedGraph& scripted, std::span<const Tensor> inputs) {
  c10::InferenceMode inference;
  std::vector<at::Tensor> in;
  for (const Tensor& t : inputs) in.push_back(aten_view(t));
  std::vector<Tensor> out;
  for (const at::Tensor& t : aten_call("TorchScript", [&] { return scripted.run(in); }))
    out.push_back(from_aten(t));
  return out;
}

// Op by op through ATen, each intermediate freed after its last reader (as PyTorch eager does).
// The f32 linears `linear` sends through oneDNN (linear_choice.h) have their parameter weights
// reordered here. A graph's gradient sets are taken through ATen's autograd (aten_autograd.h):
// ATen records the forward on the way to each loss and computes the gradients its own way, as a
// PyTorch user's loss.backward() does; intermediates() runs the graph's own backward nodes, the
// only ones that have the values asked for.
class EagerExecutable final : public plugin::Executable {
 public:
  EagerExecutable(Graph g, const plugin::Options& opts, LinearSetting linear)
      : graph_(std::move(g)),
        params_(aten_params(graph_)),
        threads_(opts.threads),
        profiling_(opts.profile),
        autograd_(plan_autograd(graph_)),
        last_use_(last_uses(graph_, autograd_.reads(graph_))) {
    LinearPlan plan =
        aten_call("linear", [&] { return plan_linears(graph_, params_, linear, threads_); });
    version_note_ = join_notes(plan.summary, autograd_.summary());
    prepare_onednn_linears(plan.onednn_nodes);
    // A linear sent to oneDNN is timed under oneDNN's op, so the profile says which path ran.
    // A node autograd stands in for has no time of its own.
    if (profiling_) {
      for (size_t i = 0; i < graph_.nodes().size(); ++i) {
        stat_of_node_.push_back(autograd_.skipped[i] ? kNoStat
                                : plan.onednn_nodes.contains(i)
                                    ? profile_.declare("aten::mkldnn_linear")
                                    : profile_.declare("aten::" + graph_.nodes()[i].op));
      }
      if (!autograd_.empty()) backward_stat_ = profile_.declare("aten::autograd::grad");
    }
  }

  const std::string& version_note() const { return version_note_; }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<at::Tensor> env = execute(inputs, last_use_, !autograd_.empty());
    std::vector<Tensor> out;
    for (ValueId v : graph_.outputs()) out.push_back(from_aten(env[static_cast<size_t>(v)]));
    return out;
  }

  std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                    std::span<const ValueId> values) override {
    check_value_ids(graph_, values, "intermediates");
    std::vector<at::Tensor> env = execute(inputs, last_uses(graph_, values), false);
    std::vector<Tensor> out;
    for (ValueId v : values) out.push_back(from_aten(env[static_cast<size_t>(v)]));
    return out;
  }

  std::vector<KernelStat> profile() const override { return profile_.stats(); }

 private:
  // `train`: take the gradient sets through autograd (autograd_), skipping their backward nodes.
  std::vector<at::Tensor> execute(std::span<const Tensor> inputs, const std::vector<int>& last_use,
                                  bool train) {
    plugin::check_inputs(graph_, inputs);
    set_threads(threads_);
    // Inference tensors cannot be recorded: a training run records only what leads to a loss.
    std::optional<c10::InferenceMode> inference;
    std::optional<at::NoGradGuard> no_grad;
    if (train) {
      no_grad.emplace();
    } else {
      inference.emplace();
    }
    std::vector<at::Tensor> env(graph_.values().size());
    const auto bind = [&](ValueId v, at::Tensor t) {
      env[static_cast<size_t>(v)] =
          train && autograd_.leaf[static_cast<size_t>(v)] ? as_leaf(t) : std::move(t);
    };
    for (size_t k = 0; k < inputs.size(); ++k) bind(graph_.inputs()[k], aten_view(inputs[k]));
    for (size_t k = 0; k < params_.size(); ++k) bind(graph_.params()[k], params_[k]);
    std::vector<at::Tensor> operands;
    for (size_t i = 0; i < graph_.nodes().size(); ++i) {
      if (train && autograd_.skipped[i]) continue;
      const Node& n = graph_.nodes()[i];
      operands.clear();
      for (ValueId v : n.operands) operands.push_back(env[static_cast<size_t>(v)]);
      const auto t0 = plugin::ProfileRecorder::Clock::now();
      const auto onednn = onednn_weights_.find(i);
      {
        const at::AutoGradMode recording(train && autograd_.recorded[i]);
        bind(n.output, aten_call(n.op.c_str(), [&] {
               return onednn != onednn_weights_.end() ? run_mkldnn_linear(operands, onednn->second)
                                                      : run_aten(graph_, n, operands);
             }));
      }
      if (profiling_ && stat_of_node_[i] != kNoStat) profile_.record(stat_of_node_[i], t0);
      if (train) {
        for (size_t s : autograd_.losses_at[i]) {
          const auto b0 = plugin::ProfileRecorder::Clock::now();
          aten_call("autograd", [&] { take_gradients(autograd_.sets[s], env); });
          if (profiling_) profile_.record(backward_stat_, b0);
        }
      }
      for (ValueId v : n.operands) {
        if (last_use[static_cast<size_t>(v)] == static_cast<int>(i) &&
            graph_.value(v).kind == ValueKind::kNode)
          env[static_cast<size_t>(v)] = at::Tensor();
      }
    }
    return env;
  }

  // Each oneDNN linear's weight and bias in oneDNN's layout when both are parameters (else they
  // are converted per call: an empty entry).
  void prepare_onednn_linears(const std::set<size_t>& nodes) {
    std::map<ValueId, size_t> param_index;
    for (size_t k = 0; k < graph_.params().size(); ++k) param_index[graph_.params()[k]] = k;
    for (size_t i : nodes) {
      const Node& n = graph_.nodes()[i];
      std::vector<at::Tensor> operands = {at::Tensor()};
      for (size_t o = 1; o < n.operands.size(); ++o) {
        const auto it = param_index.find(n.operands[o]);
        if (it != param_index.end()) operands.push_back(params_[it->second]);
      }
      onednn_weights_[i] = operands.size() == n.operands.size()
                               ? aten_call("linear", [&] { return to_mkldnn_operands(operands); })
                               : std::vector<at::Tensor>{};
    }
  }

  Graph graph_;
  std::vector<at::Tensor> params_;
  std::map<size_t, std::vector<at::Tensor>> onednn_weights_;  // node index -> weight, bias
  std::string version_note_;
  int threads_;
  bool profiling_;
  AutogradPlan autograd_;
  std::vector<int> last_use_;
  plugin::ProfileRecorder profile_;
  static constexpr size_t kNoStat = static_cast<size_t>(-1);
  std::vector<size_t> stat_of_node_;
  size_t backward_stat_ = 0;
};

// The frozen TorchScript module. Per-kernel timings, when profiling, are the ops of the optimized
// graph as PyTorch's profiler times them (`jit::aten::relu_`, ...), and the rest of the run's
// time under one name. Intermediates come
// from a second module of the same graph that returns the values asked for, frozen and optimized
// alike (returning a value may keep TorchScript from fusing it away, so they locate a difference
// rather than replay the fused run exactly).
class JitExecutable final : public plugin::Executable {
 public:
  JitExecutable(const Graph& g, const plugin::Options& opts, bool optimize, ScriptStyle style,
                LinearSetting linear, ClampSetting clamp)
      : graph_(g),
        threads_(opts.threads),
        profiling_(opts.profile),
        optimize_(optimize),
        style_(std::move(style)) {
    set_threads(threads_);
    const std::vector<at::Tensor> params = aten_params(graph_);
    LinearPlan plan =
        aten_call("linear", [&] { return plan_linears(graph_, params, linear, threads_); });
    style_.onednn_linears = std::move(plan.onednn_nodes);
    ClampChoice chosen =
        script_with_clamp(graph_, params, optimize, style_, clamp, threads_, opts.debug_dir);
    style_.native_clamp = chosen.native;
    scripted_ = std::move(chosen.scripted);
    // TorchScript's frozen module records nothing for autograd.
    version_note_ = join_notes(join_notes(plan.summary, chosen.summary),
                               graph_.gradients().empty()
                                   ? ""
                                   : "autograd: none (the graph's backward nodes in TorchScript)");
    if (!opts.debug_dir.empty()) {
      const std::filesystem::path dir = opts.debug_dir;
      artifacts_ = {dir / "torchscript.py", dir / "torchscript_optimized.txt"};
    }
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    plugin::check_inputs(graph_, inputs);
    set_threads(threads_);
    if (!profiling_) return run_scripted(*scripted_, inputs);
    std::vector<Tensor> out;
    const auto t0 = plugin::ProfileRecorder::Clock::now();
    int64_t timed = 0;
    for (const OpTime& op : profile_ops([&] { out = run_scripted(*scripted_, inputs); })) {
      profile_.add(profile_.declare("jit::" + op.name), op.ns);
      timed += op.ns;
    }
    // Some prim ops (prim::mkldnn_convolution among them) open no profiler range: their time is
    // the run's less what the ranges hold, said as such rather than lost.
    const int64_t run_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               plugin::ProfileRecorder::Clock::now() - t0)
                               .count();
    profile_.add(profile_.declare("jit::(ops without a profiler range)"),
                 std::max<int64_t>(0, run_ns - timed));
    return out;
  }

  std::vector<KernelStat> profile() const override { return profile_.stats(); }

  std::vector<std::filesystem::path> artifacts() const override { return artifacts_; }

  const std::string& version_note() const { return version_note_; }

  std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                    std::span<const ValueId> values) override {
    plugin::check_inputs(graph_, inputs);
    check_value_ids(graph_, values, "intermediates");
    Graph probe = graph_;
    probe.set_outputs(std::vector<ValueId>(values.begin(), values.end()));
    set_threads(threads_);
    return run_scripted(*script_graph(probe, aten_params(probe), optimize_, style_), inputs);
  }

 private:
  Graph graph_;
  int threads_;
  bool profiling_;
  plugin::ProfileRecorder profile_;
  bool optimize_;
  ScriptStyle style_;
  std::string version_note_;
  std::unique_ptr<ScriptedGraph> scripted_;
  std::vector<std::filesystem::path> artifacts_;
};

class LibtorchBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override {
    // The version says what the peer runs on (peer_facts.h): its dispatch level, oneDNN, the BLAS
    // and its core decide how fast it is. Taken once: it runs a few small ops.
    static const std::string version =
        fmt::format("torch {}.{}.{}; {}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                    TORCH_VERSION_PATCH, peer_facts());
    // What -c linear=auto chose for the latest graph compiled, and whether autograd took its
    // gradients: the worker reports the version again after compiling, so each result says which
    // linears went through oneDNN and which backward ran.
    std::lock_guard<std::mutex> lock(mutex_);
    return {CRUCIBLE_LIBTORCH_NAME, join_notes(version, version_note_), plugin::kAbiVersion};
  }

  // OpenBLAS's core is fixed when it loads: the harness times each one this CPU runs.
  plugin::Declaration declaration() const override { return {blas_core_choice_here(), {}}; }

  std::unique_ptr<plugin::Executable> compile(const Graph& graph,
                                              const plugin::Options& options) override {
    std::string mode = CRUCIBLE_LIBTORCH_MODE;  // libtorch: eager; libtorch_jit: jit
    bool optimize = true;
    ScriptStyle style;
    LinearSetting linear = LinearSetting::kAuto;
    ClampSetting clamp = ClampSetting::kAuto;
    plugin::Options opts = options;
    for (const auto& [key, value] : options.config) {
      if (key == "mode" && (value == "eager" || value == "jit")) {
        mode = value;
      } else if (key == "optimize_for_inference" && (value == "0" || value == "1")) {
        optimize = value == "1";
      } else if (key == "clamp" && parse_clamp_setting(value)) {
        clamp = *parse_clamp_setting(value);
      } else if (key == "debug_dir" && !value.empty()) {
        opts.debug_dir = value;  // jit: the TorchScript source and the optimized graph
      } else if (key == "linear" && parse_linear_setting(value)) {
        linear = *parse_linear_setting(value);
      } else if (key == "blas_core" && !value.empty()) {
        check_blas_core(value);  // the runner chose it before this plugin loaded
      } else {
        throw plugin::OptionError(fmt::format(
            "libtorch: unknown option -c {}={} (mode=eager|jit, optimize_for_inference=0|1, "
            "clamp=auto|safe|native, linear=auto|aten|mkldnn, blas_core=auto|env|detect|NAME, "
            "debug_dir=DIR)",
            key, value));
      }
    }
    // Mapping first: an op this plugin has no entry for is named as such, even one the
    // plugin's own copy of the op registry does not know.
    for (const Node& n : graph.nodes()) check_mappable(graph, n);
    verify(graph);
    if (mode == "jit") {
      auto exe = std::make_unique<JitExecutable>(graph, opts, optimize, style, linear, clamp);
      note_version(exe->version_note());
      return exe;
    }
    auto exe = std::make_unique<EagerExecutable>(graph, opts, linear);
    note_version(exe->version_note());
    return exe;
  }

 private:
  void note_version(const std::string& summary) {
    std::lock_guard<std::mutex> lock(mutex_);
    version_note_ = summary;
  }

  mutable std::mutex mutex_;
  std::string version_note_;  // of the latest compile: its linears (linear_choice.h), autograd

  // A named core must be the one OpenBLAS runs: it falls back to another (Prescott) for a name it
  // does not know, which would time a different peer than the one asked for.
  static void check_blas_core(const std::string& value) {
    if (value == "auto" || value == "env" || value == "detect") return;
    const std::string core = openblas_core();
    const auto lower = [](std::string s) {
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    if (lower(core) != lower(value))
      throw plugin::CompileError(fmt::format(
          "libtorch: -c blas_core={}: OpenBLAS runs core {} (it does not know {}, or the CPU "
          "lacks its instructions)",
          value, core, value));
  }
};

std::unique_ptr<plugin::Backend> create() { return std::make_unique<LibtorchBackend>(); }

}  // namespace

}  // namespace crucible::libtorch

CRUCIBLE_EXPORT_BACKEND(crucible::libtorch::create)
