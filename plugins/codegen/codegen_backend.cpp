// The codegen backend: runs the codegen pipeline, compiles the generated C++ with the system
// compiler (cached), dlopens it and executes the schedule: generated kernels, extern calls, packed
// GEMMs and convolutions, and views.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>

#include "batch_slice_run.h"
#include "crucible/codegen/codegen_config.h"
#include "crucible/codegen/program.h"
#include "crucible/codegen/toolchain.h"
#include "crucible/core/block_cache.h"
#include "crucible/core/openmp_threads.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ir/uses.h"
#include "crucible/ops/max_pool_nhwc.h"
#include "crucible/ops/packed_conv.h"
#include "crucible/ops/packed_linear.h"
#include "crucible/plugin_api.h"

namespace crucible::codegen_backend {

namespace {

namespace fs = std::filesystem;
using codegen::Program;
using codegen::Step;
using KernelFn = void(void**);

fs::path debug_dir_for(const Graph& g, const plugin::Options& o) {
  std::string dir = o.get("debug_dir", o.debug_dir);
  if (dir.empty()) {
    const char* env = std::getenv("CRUCIBLE_DEBUG");
    if (env == nullptr || std::string(env) == "0" || std::string(env).empty()) return {};
    static std::atomic<int> counter{0};
    dir = fmt::format("crucible_debug/{}_{}_{}", g.name(), ::getpid(), counter++);
  }
  return dir;
}

Epilogue epilogue_of(const std::string& name) {
  for (Epilogue e : {Epilogue::kNone, Epilogue::kRelu, Epilogue::kGelu, Epilogue::kGeluTanh,
                     Epilogue::kSigmoid, Epilogue::kTanh}) {
    if (name == epilogue_name(e)) return e;
  }
  throw Error("codegen: unknown GEMM epilogue " + name);
}

class CodegenExecutable;
// Compiles `graph` into an executable; `keep` lists values to store for intermediates() (a variant:
// no profiling, no debug dumps).
std::unique_ptr<CodegenExecutable> compile_executable(const Graph& graph,
                                                      const plugin::Options& options,
                                                      const std::vector<ValueId>& keep);

class CodegenExecutable final : public plugin::Executable {
 public:
  CodegenExecutable(Program program, codegen::LoadedLibrary lib, const plugin::Options& opts,
                    std::vector<fs::path> artifacts)
      : prog_(std::move(program)),
        lib_(std::move(lib)),
        opts_(opts),
        artifacts_(std::move(artifacts)) {
    const Graph& g = prog_.graph;
    // A planted crash (-c inject=OP:crash) in a node that runs outside generated code (an extern
    // call, a packed GEMM or convolution with what it absorbed) fires when its step runs.
    const codegen::CodegenConfig config = codegen::CodegenConfig::parse(opts_.config);
    const codegen::Injection& inj = config.inject;
    conv_algorithm_ = config.conv_algorithm == "direct"     ? ConvAlgorithm::kDirect
                      : config.conv_algorithm == "winograd" ? ConvAlgorithm::kWinograd
                                                            : ConvAlgorithm::kFastest;
    for (const Step& s : prog_.steps) {
      bool crash = false;
      for (int ni : s.nodes) {
        crash |= s.kind != Step::Kind::kKernel && inj.kind == "crash" &&
                 inj.hits(g.nodes()[ni].op, g.value(g.nodes()[ni].output).name);
      }
      planted_crash_.push_back(crash);
      fns_.push_back(s.kind == Step::Kind::kKernel ? lib_.function<KernelFn>(s.name) : nullptr);
      kernels_.push_back(s.kind == Step::Kind::kExtern
                             ? &OpRegistry::global().get(g.nodes()[s.node].op).kernel
                             : nullptr);
    }
    // Only parameters the schedule reads at run time stay resident. The ones only packed below
    // (weights, folded batch norms) are materialized while packing and dropped, so their f32
    // copies do not sit beside the packed ones (ResNet-50: 100 MB).
    std::set<ValueId> resident(g.outputs().begin(), g.outputs().end());
    for (const Step& s : prog_.steps) resident.insert(s.inputs.begin(), s.inputs.end());
    for (ValueId p : g.params()) {
      if (resident.contains(p)) params_.emplace_back(p, materialize_param(g, p).contiguous());
    }
    // Weights are packed here, once, into the GEMM library's layout (what makes linear faster than
    // eager's per-call path); each packed step keeps its own.
    for (const Step& s : prog_.steps) {
      convs_.push_back(s.kind == Step::Kind::kPackedConv ? pack_conv(s) : nullptr);
      if (s.kind != Step::Kind::kPackedLinear) {
        packed_.emplace_back(nullptr);
        continue;
      }
      // Shapes are static: pack for this M (one copy of the weights, in the layout its
      // convolution wants) and build its GEMM primitive now, so its JIT is compile time.
      const Tensor w = param_tensor(s.weight);
      const int64_t k = s.weight_nk ? w.shape()[1] : w.shape()[0];
      const int64_t n = s.weight_nk ? w.shape()[0] : w.shape()[1];
      const int64_t m = n ? g.value(s.outputs[0]).type.numel() / n : 0;  // K may be 0
      packed_.push_back(std::make_unique<PackedLinear>(
          w, s.weight_nk, s.bias >= 0 ? param_tensor(s.bias) : Tensor(), epilogue_of(s.epilogue),
          1.0f, 1.0f, m));
      packed_.back()->prepare(m, k, packed_.back()->out_features());
    }
    // A batch slice's convolutions run on its slice and on what is left at the batch's end: their
    // kernels are built now too.
    for (const codegen::BatchSlice& b : prog_.batch_slices) {
      for (size_t i = b.first; i <= b.last; ++i) {
        Shape x = g.value(prog_.steps[i].inputs[0]).type.shape;
        const int64_t batch = x[0];
        x[0] = b.images;
        convs_[i]->prepare(x);
        if (batch % b.images != 0) {
          x[0] = batch % b.images;
          convs_[i]->prepare(x);
        }
      }
    }
    // The f32 weights materialized only for packing are gone, but their blocks sit in the cache of
    // freed blocks, sized as no activation is (a 4096x4096 MLP: 95 MB held): hand them back. The
    // cache refills with the activations' sizes on the first run.
    auto any = [](const auto& v) {
      return std::any_of(v.begin(), v.end(), [](auto& p) { return p != nullptr; });
    };
    if (any(packed_) || any(convs_)) block_cache_clear();
    std::vector<std::vector<ValueId>> step_reads;
    for (const Step& s : prog_.steps) step_reads.push_back(s.inputs);
    last_use_ = last_uses(g, step_reads);
    if (opts_.profile) {
      for (size_t i = 0; i < prog_.steps.size(); ++i) {
        const Step& s = prog_.steps[i];
        std::string name = codegen::profile_name(g, s);
        // Winograd does about a quarter of the direct sum's multiplications, which the cost
        // counts, so such a step's roofline fraction may pass 100%: the name says why.
        if (convs_[i] != nullptr && convs_[i]->uses_winograd())
          name.insert(name.size() - 1, " winograd");
        stat_of_step_.push_back(profile_.declare(name));
        const codegen::StepCost c = codegen::step_cost(g, s);
        cost_of_step_.push_back({c.flops, c.bytes});
      }
    }
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::vector<Tensor> env = execute(inputs, {});
    std::vector<Tensor> out;
    for (ValueId v : prog_.graph.outputs()) out.push_back(env[v]);
    return out;
  }

  // Values are ids of the graph as given to compile(). Those this program keeps in buffers come
  // from a normal run; for the others a variant storing them as extra kernel outputs is compiled
  // once per requested set and cached.
  std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                    std::span<const ValueId> values) override {
    const Graph& src = prog_.source;
    check_value_ids(src, values, "intermediates");
    CodegenExecutable* exe = this;
    if (!holds_all(values)) {
      std::vector<ValueId> key(values.begin(), values.end());
      std::sort(key.begin(), key.end());
      key.erase(std::unique(key.begin(), key.end()), key.end());
      auto& variant = variants_[key];
      if (!variant) {
        plugin::Options o = opts_;
        o.profile = false;
        variant = compile_executable(src, o, key);
      }
      exe = variant.get();
    }
    std::set<ValueId> keep;
    for (ValueId v : values) keep.insert(exe->prog_.value_of[v]);
    std::vector<Tensor> env = exe->execute(inputs, keep);
    std::vector<Tensor> out;
    for (ValueId v : values) {
      const ValueId d = exe->prog_.value_of[v];
      if (env[d].defined()) {
        out.push_back(env[d]);
      } else if (exe->prog_.graph.value(d).kind == ValueKind::kParam) {
        out.push_back(materialize_param(exe->prog_.graph, d));  // only packed, so not resident
      } else {
        out.push_back(exe->constant(d));
      }
    }
    return out;
  }

  std::vector<plugin::KernelStat> profile() const override { return profile_.stats(); }
  std::vector<fs::path> artifacts() const override { return artifacts_; }

 private:
  // Whether a run of this program leaves every value in `values` (source ids) in a buffer, as
  // NCHW: inputs, parameters, the steps' results (but those kept in a chain layout) and constants
  // do.
  bool holds_all(std::span<const ValueId> values) const {
    std::set<ValueId> held;
    for (const Step& s : prog_.steps) {
      if (s.y_layout == ActivationLayout::kNchw) held.insert(s.outputs.begin(), s.outputs.end());
      if (s.raw >= 0) held.insert(s.raw);
    }
    for (ValueId v : values) {
      const ValueId d = prog_.value_of[v];
      const Value& val = prog_.graph.value(d);
      if (val.kind == ValueKind::kNode && !held.contains(d) &&
          !prog_.graph.nodes()[val.node].operands.empty()) {
        return false;
      }
    }
    return true;
  }

  // A constant inlined into the kernels that read it, evaluated by its eager kernel.
  Tensor constant(ValueId v) const {
    const Node& n = prog_.graph.nodes()[prog_.graph.value(v).node];
    return OpRegistry::global().get(n.op).kernel(std::vector<Tensor>{}, n.attrs);
  }

  // A parameter's tensor: the resident copy, or materialized anew for one only packed (dropped
  // after packing).
  Tensor param_tensor(ValueId id) const {
    for (const auto& [pid, t] : params_) {
      if (pid == id) return t;
    }
    return materialize_param(prog_.graph, id).contiguous();
  }

  // A packed GEMM's value before its epilogue: the same packed weights and bias without the
  // post-op, packed on first use.
  Tensor gemm_before_epilogue(size_t step, const Tensor& x) {
    const Step& s = prog_.steps[step];
    auto& raw = raw_packed_[step];
    if (!raw) {
      // The weights may have been dropped after packing: materialize them again, once.
      raw = std::make_unique<PackedLinear>(param_tensor(s.weight), s.weight_nk,
                                           s.bias >= 0 ? param_tensor(s.bias) : Tensor(),
                                           Epilogue::kNone);
    }
    const TensorType& t = prog_.graph.value(s.raw).type;
    Tensor h = Tensor::empty(t.dtype, t.shape);
    const int64_t k = raw->in_features(), n = raw->out_features();
    // Rows from the output: with K = 0 the input has no elements but the output still has rows.
    raw->run(x.data<float>(), n ? h.numel() / n : 0, k, h.data<float>(), n);
    return h;
  }

  // A conv step's PackedConv2d: weights (batch norm folded in) packed now, and oneDNN's kernel for
  // the graph's static input shape built now, so both are compile time.
  std::unique_ptr<PackedConv2d> pack_conv(const Step& s) {
    const Graph& g = prog_.graph;
    auto param = [this](ValueId id) { return param_tensor(id); };
    ConvEpilogue e;
    if (s.bn_node >= 0) {
      const Node& bn = g.nodes()[s.bn_node];
      e.fold_batch_norm(param(bn.operands[1]), param(bn.operands[2]), param(bn.operands[3]),
                        param(bn.operands[4]), bn.attrs.get_float_or("eps", 1e-5));
    }
    e.residual = s.residual >= 0;
    if (s.act_node >= 0) {
      const Node& act = g.nodes()[s.act_node];
      // A mul is silu's, absorbed with the sigmoid before it (conv_chain.cpp).
      e.activation = act.op == "relu"          ? ConvActivation::kRelu
                     : act.op == "clamp"       ? ConvActivation::kClamp
                     : act.op == "sigmoid"     ? ConvActivation::kSigmoid
                     : act.op == "hardsigmoid" ? ConvActivation::kHardsigmoid
                     : act.op == "hardswish"   ? ConvActivation::kHardswish
                                             : ConvActivation::kSilu;  // silu, or mul after sigmoid
      if (act.op == "clamp") {
        e.clamp_min = act.attrs.get_float("min");
        e.clamp_max = act.attrs.get_float("max");
      }
    }
    const Shape& x = g.value(s.inputs[0]).type.shape;
    auto conv = std::make_unique<PackedConv2d>(
        param(s.weight), s.bias >= 0 ? param(s.bias) : Tensor(), g.nodes()[s.node].attrs, x,
        std::move(e), ConvLayouts{s.x_layout, s.y_layout}, conv_algorithm_);
    conv->prepare(x);
    return conv;
  }

  std::vector<Tensor> execute(std::span<const Tensor> inputs, const std::set<ValueId>& keep) {
    const Graph& g = prog_.graph;
    plugin::check_inputs(g, inputs);
    if (opts_.threads > 0) use_openmp_threads(opts_.threads);
    std::vector<Tensor> env(g.values().size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      env[g.inputs()[k]] = inputs[k].contiguous();  // generated code indexes contiguous buffers
    }
    for (const auto& [id, t] : params_) env[id] = t;
    std::vector<void*> args;
    std::vector<Tensor> operands;
    auto slice = prog_.batch_slices.begin();
    for (size_t i = 0; i < prog_.steps.size(); ++i) {
      if (slice != prog_.batch_slices.end() && slice->first == i) {
        run_batch_slice(*slice, env, keep);
        for (; i < slice->last; ++i) release_after(i, env, keep);
        release_after(i, env, keep);
        ++slice;
        continue;
      }
      const Step& s = prog_.steps[i];
      const auto t0 = opts_.profile ? plugin::ProfileRecorder::Clock::now()
                                    : plugin::ProfileRecorder::Clock::time_point{};
      if (planted_crash_[i]) ::raise(SIGSEGV);
      if (s.kind == Step::Kind::kKernel) {
        args.clear();
        for (ValueId v : s.inputs) args.push_back(env[v].raw_data());
        for (size_t k = 0; k < s.outputs.size(); ++k) {
          const ValueId out = s.outputs[k];
          const int reuse = s.in_place[k];
          // In place only when nothing else holds the input's storage (no view, no caller's copy)
          // and intermediates() does not return it.
          if (reuse >= 0 && env[s.inputs[reuse]].storage().use_count() == 1 &&
              env[s.inputs[reuse]].is_contiguous() && !keep.contains(s.inputs[reuse])) {
            env[out] = env[s.inputs[reuse]];
          } else {
            env[out] = Tensor::empty(g.value(out).type.dtype, g.value(out).type.shape);
          }
          args.push_back(env[out].raw_data());
        }
        fns_[i](args.data());
      } else if (s.kind == Step::Kind::kPackedLinear) {
        const Tensor x = env[s.inputs[0]].contiguous();
        const TensorType& yt = g.value(s.outputs[0]).type;
        Tensor y = Tensor::empty(yt.dtype, yt.shape);
        const int64_t k = packed_[i]->in_features(), n = packed_[i]->out_features();
        packed_[i]->run(x.data<float>(), n ? y.numel() / n : 0, k, y.data<float>(), n);
        env[s.outputs[0]] = y;
        if (s.raw >= 0) env[s.raw] = gemm_before_epilogue(i, x);
      } else if (s.kind == Step::Kind::kPackedConv) {
        const Tensor x = env[s.inputs[0]].contiguous();
        const TensorType& yt = g.value(s.outputs[0]).type;
        Tensor y, residual;
        if (s.residual >= 0) {
          // The output takes over the residual's buffer when the residual dies here and nothing
          // else holds its storage (not the conv's input, no view, no caller's or kept copy).
          Tensor& r = env[s.residual];
          if (last_use_[s.residual] == static_cast<int>(i) && !keep.contains(s.residual) &&
              g.value(s.residual).kind == ValueKind::kNode && r.is_contiguous() &&
              r.storage().use_count() == 1) {
            y = r;
          }
          residual = r.contiguous();
        }
        if (!y.defined()) y = Tensor::empty(yt.dtype, yt.shape);
        convs_[i]->run(x.data<float>(), x.shape(), y.data<float>(),
                       residual.defined() ? residual.data<float>() : nullptr);
        env[s.outputs[0]] = y;
      } else if (s.kind == Step::Kind::kExtern && s.y_layout != ActivationLayout::kNchw) {
        const Node& n = g.nodes()[s.node];  // a max_pool2d in a chain (conv_layouts.cpp)
        const Tensor& x = env[s.inputs[0]];
        const TensorType& yt = g.value(n.output).type;
        Tensor y = Tensor::empty(yt.dtype, yt.shape);
        (s.y_layout == ActivationLayout::kNhwc ? max_pool2d_nhwc : max_pool2d_nchw8c)(
            x.data<float>(), x.shape(), n.attrs, y.data<float>());
        env[n.output] = y;
      } else if (s.kind == Step::Kind::kExtern) {
        const Node& n = g.nodes()[s.node];
        operands.clear();
        for (ValueId v : n.operands) operands.push_back(env[v]);
        Tensor r = (*kernels_[i])(operands, n.attrs);
        operands.clear();  // so that they die at their last use, not at the next extern call
        env[n.output] = r.is_contiguous() ? r : r.contiguous();
      } else {
        const Tensor& base = env[s.inputs[0]];
        env[s.outputs[0]] =
            base.as_strided(s.view_shape, s.view_strides, base.offset() + s.view_offset);
      }
      if (opts_.profile) profile_.record(stat_of_step_[i], t0, cost_of_step_[i]);
      release_after(i, env, keep);
    }
    return env;
  }

  // Drops the buffers whose last reader was step i.
  void release_after(size_t i, std::vector<Tensor>& env, const std::set<ValueId>& keep) const {
    const Graph& g = prog_.graph;
    const Step& s = prog_.steps[i];
    for (ValueId v : s.inputs) {
      if (last_use_[v] == static_cast<int>(i) && g.value(v).kind == ValueKind::kNode &&
          !keep.contains(v)) {
        env[v] = Tensor();
      }
    }
    // A result no step reads (a view whose own views are laid over the base buffer directly,
    // such as a reshape ahead of an attention head's permute) would hold its buffer to the end
    // of the run: MobileBERT kept 96 such 8 MiB buffers, 0.75 GB above eager's peak.
    for (ValueId v : s.outputs) {
      if (last_use_[v] < static_cast<int>(i) && !keep.contains(v)) env[v] = Tensor();
    }
  }

  // A batch slice's steps, profiled per call with the share of the batch each call ran.
  void run_batch_slice(const codegen::BatchSlice& b, std::vector<Tensor>& env,
                       const std::set<ValueId>& keep) {
    plugin::ProfileRecorder::Clock::time_point t0;
    const codegen::BatchSliceContext c{
        prog_.graph,
        prog_.steps,
        convs_,
        last_use_,
        keep,
        [&](size_t i) {
          if (planted_crash_[i]) ::raise(SIGSEGV);
          if (opts_.profile) t0 = plugin::ProfileRecorder::Clock::now();
        },
        [&](size_t i, double share) {
          if (!opts_.profile) return;
          const plugin::KernelCost& cost = cost_of_step_[i];
          profile_.record(stat_of_step_[i], t0, {cost.flops * share, cost.bytes * share});
        }};
    codegen::run_batch_slice(b, c, env);
  }

  Program prog_;
  codegen::LoadedLibrary lib_;
  plugin::Options opts_;
  std::vector<bool> planted_crash_;  // per step
  std::vector<fs::path> artifacts_;
  std::vector<KernelFn*> fns_;
  std::vector<const Kernel*> kernels_;
  std::vector<std::unique_ptr<PackedLinear>> packed_;
  std::vector<std::unique_ptr<PackedConv2d>> convs_;
  ConvAlgorithm conv_algorithm_ = ConvAlgorithm::kFastest;
  std::vector<std::pair<ValueId, Tensor>> params_;
  std::vector<int> last_use_;
  plugin::ProfileRecorder profile_;
  std::vector<plugin::KernelCost> cost_of_step_;  // per step, parallel to stat_of_step_
  std::vector<size_t> stat_of_step_;
  std::map<size_t, std::unique_ptr<PackedLinear>> raw_packed_;  // by step, see gemm_before_epilogue
  std::map<std::vector<ValueId>, std::unique_ptr<CodegenExecutable>> variants_;  // by kept values
};

class CodegenBackend final : public plugin::Backend {
 public:
  plugin::BackendInfo info() const override { return {"codegen", "0.1.0", plugin::kAbiVersion}; }

  // Kernels are compiled on the node that runs them, by the compiler $CXX names (else c++).
  std::string unavailable_here() const override {
    return codegen::missing_compiler(std::getenv("CXX"), std::getenv("PATH"));
  }

  // What the minifier may turn off to find the pass a failure needs (each by its -c option), the
  // per-node fallback to eager's kernel, and the file holding all generated code.
  plugin::Declaration declaration() const override {
    plugin::Declaration d;
    const std::vector<std::string> conv = {"conv2d"};  // chains exist only between packed convs
    d.bisection.passes = {
        {"fusion", "fusion", "off", {}, false},
        {"packed_linear", "packed_linear", "off", {}, false},
        {"packed_conv", "packed_conv", "off", {}, false},
        {"channels_last", "channels_last", "off", conv, false},
        {"chain_kernels", "chain_kernels", "off", conv, false},
        {"batch_slices", "batch_slices", "off", conv, false},
        {"conv_algorithm", "conv_algorithm", "direct", conv, false},
        {"fast_math", "fast_math", "off", {}, true},
    };
    for (const std::string& op : codegen::decomposed_ops())
      d.bisection.passes.push_back({"decompose(" + op + ")", "no_decompose", op, {op}, false});
    d.bisection.node_fallback_key = "eager_nodes";
    d.bisection.code_file = "output_code.cpp";
    return d;
  }

  std::unique_ptr<plugin::Executable> compile(const Graph& graph,
                                              const plugin::Options& options) override {
    return compile_executable(graph, options, {});
  }
};

std::unique_ptr<CodegenExecutable> compile_executable(const Graph& graph,
                                                      const plugin::Options& options,
                                                      const std::vector<ValueId>& keep) {
  codegen::CodegenOptions copts;
  try {
    copts.config = codegen::CodegenConfig::parse(options.config);
  } catch (const Error& e) {
    throw plugin::OptionError(e.what());
  }
  copts.threads = options.threads;
  copts.keep = keep;
  Program program;
  try {
    program = codegen::build_program(graph, copts);
  } catch (const Error& e) {
    throw plugin::CompileError(e.what());
  }
  codegen::ToolchainOptions topts = codegen::ToolchainOptions::defaults();
  topts.fast_math = copts.config.fast_math;
  const fs::path debug = keep.empty() ? debug_dir_for(graph, options) : fs::path();
  std::vector<fs::path> artifacts;
  auto dump = [&](const std::string& name, const std::string& text) {
    if (debug.empty()) return;
    fs::create_directories(debug);
    std::ofstream(debug / name) << text;
    artifacts.push_back(debug / name);
  };
  for (const auto& [name, text] : program.dumps) dump(name, text);
  codegen::BuildResult built;
  try {
    built = codegen::build_shared_library(program.sources, topts);
  } catch (const codegen::ToolchainError& e) {
    dump("compile_times.txt", "compile failed\n");
    throw plugin::CompileError(e.what());
  }
  std::string times;
  for (const auto& [pass, secs] : program.pass_seconds)
    times += fmt::format("{:<16} {:10.6f} s\n", pass, secs);
  times += fmt::format("{:<16} {:10.6f} s ({}; {} translation unit(s); key {})\n", "toolchain",
                       built.compile_seconds, built.cache_hit ? "cache hit" : "compiled",
                       program.sources.size(), built.key);
  for (const auto& cmd : built.command_lines) times += "  " + cmd + "\n";
  dump("compile_times.txt", times);
  try {
    codegen::LoadedLibrary lib(built.library, built.key);
    return std::make_unique<CodegenExecutable>(std::move(program), std::move(lib), options,
                                               std::move(artifacts));
  } catch (const codegen::ToolchainError& e) {
    throw plugin::CompileError(e.what());
  }
}

std::unique_ptr<plugin::Backend> create() { return std::make_unique<CodegenBackend>(); }

}  // namespace

}  // namespace crucible::codegen_backend

CRUCIBLE_EXPORT_BACKEND(crucible::codegen_backend::create)
