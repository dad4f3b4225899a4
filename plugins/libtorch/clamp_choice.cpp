// -c clamp=auto's choice (see clamp_choice.h): PyTorch's own ReLU6 form where it computes the same
// as the safe one on this graph and is faster, measured as a user tuning the peer would.
#include "clamp_choice.h"

#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "aten_bridge.h"
#include "choice_file.h"
#include "crucible/core/openmp_threads.h"

namespace crucible::libtorch {

namespace {

// Rounds of (safe, native) calls after the checking call of each, ending once the choice has
// taken kClampBudgetMs (after at least one): 5 on MobileNetV2 at batch 16, whose safe form takes
// 113-355 ms a call with the allocators of a 2-core Zen 5.
constexpr int kClampRounds = 5;
constexpr double kClampBudgetMs = 2000;

struct ClampDecision {
  bool native = false;
  double safe_ms = 0, native_ms = 0;
  std::string why;  // "" when both were timed; else why native was not
};

struct ClampKey {
  size_t source_hash;
  int threads;
  auto operator<=>(const ClampKey&) const = default;
};

std::mutex g_clamp_mutex;
std::map<ClampKey, ClampDecision>
    g_clamp_decisions;  // for the process: the same graph decides once

// In the kernel cache folder, one line a graph: hash (of its source and types) threads native
// safe_ms native_ms why.
constexpr const char* kClampChoicesName = "clamp_choices";

void load_clamp_choices(const std::filesystem::path& file) {
  for (const std::string& line : read_choice_lines(file)) {
    std::istringstream fields(line);
    ClampKey k{};
    ClampDecision d;
    int native = 0;
    if (!(fields >> k.source_hash >> k.threads >> native >> d.safe_ms >> d.native_ms)) continue;
    std::getline(fields >> std::ws, d.why);
    d.native = native != 0;
    g_clamp_decisions.emplace(k, d);
  }
}

void save_clamp_choices(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  for (const auto& [k, d] : g_clamp_decisions) {
    lines.push_back(fmt::format("{} {} {} {} {} {}", k.source_hash, k.threads, d.native ? 1 : 0,
                                d.safe_ms, d.native_ms, d.why));
  }
  write_choice_lines(file, lines);
}

// Where the two forms write a clamp apart: a floating clamp with both bounds (aten_ops.cpp).
bool has_two_bound_float_clamp(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.op != "clamp" || !is_floating(g.value(n.output).type.dtype)) continue;
    if (n.attrs.get_optional_float("min") && n.attrs.get_optional_float("max")) return true;
  }
  return false;
}

// Deterministic inputs whose floats reach past ReLU6's bounds on both sides (sin scaled to
// [-8, 8], no constant rows to hide a layout bug); other dtypes zeros, a valid index anywhere.
std::vector<at::Tensor> probe_inputs(const Graph& g) {
  std::vector<at::Tensor> in;
  for (ValueId id : g.inputs()) {
    const TensorType& t = g.value(id).type;
    const at::ScalarType dtype = to_aten(t.dtype);
    if (is_floating(t.dtype)) {
      in.push_back(at::arange(t.numel(), at::TensorOptions().dtype(at::kFloat))
                       .mul(0.618034)
                       .sin()
                       .mul(8)
                       .reshape(t.shape)
                       .to(dtype));
    } else {
      in.push_back(at::zeros(t.shape, at::TensorOptions().dtype(dtype)));
    }
  }
  return in;
}

// Why native's outputs are not safe's ("" when they agree). The forms differ only in how a clamp
// is written, so the rest of the graph rounds alike up to oneDNN's own choices; PyTorch 1.13's bug
// leaves elements unclamped, off by far more than rounding.
std::string disagreement(const std::vector<at::Tensor>& native,
                         const std::vector<at::Tensor>& safe) {
  if (native.size() != safe.size())
    return fmt::format("{} outputs where safe gives {}", native.size(), safe.size());
  for (size_t k = 0; k < safe.size(); ++k) {
    if (native[k].sizes() != safe[k].sizes()) return fmt::format("output {}'s shape differs", k);
    if (!at::isFloatingType(safe[k].scalar_type())) {
      if (!at::equal(native[k], safe[k])) return fmt::format("output {} differs", k);
      continue;
    }
    const at::Tensor a = native[k].to(at::kDouble), b = safe[k].to(at::kDouble);
    const double scale = std::max(1.0, b.abs().nan_to_num(0, 0, 0).max().item<double>());
    const at::Tensor bad = at::logical_not(at::isclose(a, b, 1e-3, 1e-3 * scale, true));
    const int64_t n = bad.sum().item<int64_t>();
    if (n > 0)
      return fmt::format("differs from safe at {} of {} elements of output {}", n, b.numel(), k);
  }
  return "";
}

ClampDecision measure_forms(ScriptedGraph& safe,
                            const std::function<std::unique_ptr<ScriptedGraph>()>& native_fn,
                            const Graph& g, std::unique_ptr<ScriptedGraph>& native) {
  c10::InferenceMode inference;
  ClampDecision d;
  try {
    native = native_fn();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    d.why = "does not compile: " + what.substr(0, std::min<size_t>(what.find('\n'), 80));
    return d;
  }
  const std::vector<at::Tensor> in = probe_inputs(g);
  auto first_line = [](const std::exception& e) {
    const std::string what = e.what();
    return what.substr(0, std::min<size_t>(what.find('\n'), 80));
  };
  std::vector<at::Tensor> want;
  try {
    want = safe.run(in);  // also the warm calls
  } catch (const std::exception& e) {
    // The probe's input is not the graph's (zeros where integers divide, say): nothing to
    // compare against, so the safe form stays and the run's own inputs decide its verdict.
    d.why = "unchecked: the probe input fails the safe form too: " + first_line(e);
    return d;
  }
  try {
    d.why = disagreement(native->run(in), want);
  } catch (const std::exception& e) {
    d.why = "throws: " + first_line(e);
  }
  if (!d.why.empty()) return d;
  std::vector<double> safe_ms, native_ms;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < kClampRounds; ++round) {
    if (round >= 1 && Ms(std::chrono::steady_clock::now() - t0).count() > kClampBudgetMs) break;
    safe_ms.push_back(time_ms([&] { safe.run(in); }));
    native_ms.push_back(time_ms([&] { native->run(in); }));
  }
  d.safe_ms = median(safe_ms);
  d.native_ms = median(native_ms);
  d.native = d.native_ms < d.safe_ms;
  return d;
}

std::string describe_choice(const ClampDecision& d) {
  if (!d.why.empty()) return fmt::format("clamp auto: safe (native {})", d.why);
  return fmt::format("clamp auto: {} (native {:.2f} ms, safe {:.2f} ms; outputs agree)",
                     d.native ? "native" : "safe", d.native_ms, d.safe_ms);
}

}  // namespace

std::optional<ClampSetting> parse_clamp_setting(const std::string& value) {
  if (value == "safe") return ClampSetting::kSafe;
  if (value == "native") return ClampSetting::kNative;
  if (value == "auto") return ClampSetting::kAuto;
  return std::nullopt;
}

ClampChoice script_with_clamp(const Graph& g, const std::vector<at::Tensor>& params,
                              bool optimize_for_inference, ScriptStyle style, ClampSetting setting,
                              int threads, const std::filesystem::path& debug_dir) {
  ClampChoice choice;
  if (setting != ClampSetting::kAuto || !has_two_bound_float_clamp(g)) {
    style.native_clamp = setting == ClampSetting::kNative;
    choice.native = style.native_clamp;
    choice.scripted = script_graph(g, params, optimize_for_inference, style, debug_dir);
    return choice;
  }
  style.native_clamp = false;
  std::unique_ptr<ScriptedGraph> safe = script_graph(g, params, optimize_for_inference, style);
  ScriptStyle native_style = style;
  native_style.native_clamp = true;
  auto compile_native = [&] {
    return script_graph(g, params, optimize_for_inference, native_style);
  };
  if (threads > 0) use_openmp_threads(threads);  // timed on the run's threads
  // The source names no shape (parameters are attributes): the types of the inputs and
  // parameters join it, so the same code on other shapes decides anew.
  std::string keyed = safe->source();
  for (const std::vector<ValueId>* ids : {&g.inputs(), &g.params()}) {
    for (ValueId id : *ids) {
      const TensorType& t = g.value(id).type;
      keyed += fmt::format("\n{} {}", dtype_name(t.dtype), fmt::join(t.shape, "x"));
    }
  }
  const ClampKey key{std::hash<std::string>{}(keyed), omp_get_max_threads()};
  std::unique_ptr<ScriptedGraph> native;
  ClampDecision d;
  {
    std::lock_guard<std::mutex> lock(g_clamp_mutex);
    const std::filesystem::path file = choices_file(kClampChoicesName);
    if (!file.empty()) load_clamp_choices(file);
    if (auto it = g_clamp_decisions.find(key); it != g_clamp_decisions.end()) {
      d = it->second;
    } else {
      d = measure_forms(*safe, compile_native, g, native);
      g_clamp_decisions.emplace(key, d);
      if (!file.empty()) save_clamp_choices(file);
    }
  }
  choice.native = d.native;
  choice.summary = describe_choice(d);
  if (!debug_dir.empty()) {
    choice.scripted =
        script_graph(g, params, optimize_for_inference, d.native ? native_style : style, debug_dir);
  } else if (d.native) {
    choice.scripted = native ? std::move(native) : compile_native();
  } else {
    choice.scripted = std::move(safe);
  }
  return choice;
}

}  // namespace crucible::libtorch
