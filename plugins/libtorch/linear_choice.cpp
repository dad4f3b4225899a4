// -c linear=auto's per-shape choice (see linear_choice.h), as codegen picks Winograd for a
// convolution: both paths run on the shape's real weights, oneDNN's result is checked, the faster
// correct one wins. On 2 cores oneDNN's linear took bert_base's jit run from 1850 to 1438 ms, but
// it is not faster for every shape or machine, hence measured rather than assumed.
#include "linear_choice.h"

#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "choice_file.h"
#include "crucible/core/openmp_threads.h"
#include "mkldnn_linear.h"

namespace crucible::libtorch {

namespace {

// Below this many multiply-adds (about 0.1 ms of GEMM on 2 cores) a linear's path cannot move a
// model's time enough to pay for timing it: it stays on ATen.
constexpr double kMinMacs = 4.0 * 1024 * 1024;
// The most timing one plan may add to a compile; the shapes left after it stay on ATen. Shapes are
// timed largest first, so the budget goes where the time is. gpt2's tied 512x768->50257 head
// alone takes about 2.5 s of it (0.55 s a call: warm calls, the check, one round); at 3 s it left
// the model's other four shapes untimed.
constexpr double kBudgetMs = 6000;
// Rounds of (ATen, oneDNN) calls after one warm call of each, ending once a shape has taken
// kShapeMs (after at least one): 7 for a 1 ms GEMM, one for the 0.5 s head, whose own noise is
// small beside a call.
constexpr int kMaxRounds = 7;
constexpr double kShapeMs = 300;

struct ShapeKey {
  int64_t rows, in, out;
  bool bias;
  int threads;
  auto operator<=>(const ShapeKey&) const = default;
  double macs() const {
    return static_cast<double>(rows) * static_cast<double>(in) * static_cast<double>(out);
  }
  std::string str() const {
    return fmt::format("{}x{}->{}{}", rows, in, out, bias ? "" : " nobias");
  }
};

struct Decision {
  bool onednn = false;
  std::string why;  // "tiny", "budget", "discarded, REASON", or "" when both were timed
  double aten_ms = 0, onednn_ms = 0;
};

std::mutex g_mutex;
std::map<ShapeKey, Decision> g_decisions;  // for the process: the same shape decides once

// The decisions are kept in the kernel cache folder too (choice_file.h), as codegen keeps its
// kernels there: a run gives each model's profile and timing workers one folder (runner.cpp), so
// the path the profile describes is the path that is timed. Timed apart, gpt2's LM head was timed
// on ATen and profiled on oneDNN in one run. After the context line, one line a shape: rows in out
// bias threads onednn aten_ms onednn_ms why.
constexpr const char* kChoicesName = "linear_choices";

// Adds the folder's decisions the process has not made itself; a malformed line is left out.
void load_choices(const std::filesystem::path& file) {
  for (const std::string& line : read_choice_lines(file)) {
    std::istringstream fields(line);
    ShapeKey k{};
    Decision d;
    int bias = 0, onednn = 0;
    if (!(fields >> k.rows >> k.in >> k.out >> bias >> k.threads >> onednn >> d.aten_ms >>
          d.onednn_ms))
      continue;
    std::getline(fields >> std::ws, d.why);
    k.bias = bias != 0;
    d.onednn = onednn != 0;
    g_decisions.emplace(k, d);
  }
}

void save_choices(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  for (const auto& [k, d] : g_decisions) {
    lines.push_back(fmt::format("{} {} {} {} {} {} {} {} {}", k.rows, k.in, k.out, k.bias ? 1 : 0,
                                k.threads, d.onednn ? 1 : 0, d.aten_ms, d.onednn_ms, d.why));
  }
  write_choice_lines(file, lines);
}

// Why oneDNN's result `got` is not ATen's `ref` up to rounding ("" when it is). Each of the two
// f32 results of a length-K dot product plus a bias is within (K+1) u |x|.|w| + |b| of the exact
// value (u = 2^-24, the unit roundoff), so they may differ by (K+1) eps (|x|.|w| + |b|), eps = 2u;
// a path off by more computes something else.
std::string check(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                  const at::Tensor& got, const at::Tensor& ref) {
  if (got.sizes() != ref.sizes())
    return fmt::format("shape [{}] where aten gives [{}]", fmt::join(got.sizes(), ","),
                       fmt::join(ref.sizes(), ","));
  const double eps = std::numeric_limits<float>::epsilon();
  const at::Tensor bound =
      at::linear(x.abs(), w.abs(), b.defined() ? b.abs() : b) * ((x.size(1) + 1) * eps);
  const at::Tensor diff = (got - ref).abs();
  // NaN in `diff` fails `diff <= bound`, so a NaN from one path alone is a difference too.
  const at::Tensor bad = at::logical_not(diff <= bound);
  if (!bad.any().item<bool>()) return "";
  const at::Tensor excess = at::where(bad, diff - bound, at::zeros_like(diff)).nan_to_num(1e30);
  const int64_t at = excess.reshape(-1).argmax().item<int64_t>();
  return fmt::format("differs from aten by {:.3g} where f32 rounding allows {:.3g}",
                     diff.reshape(-1)[at].item<float>(), bound.reshape(-1)[at].item<float>());
}

// Times and checks one shape on its first node's weights.
Decision measure(const ShapeKey& key, const at::Tensor& w, const at::Tensor& b) {
  c10::InferenceMode inference;
  Decision d;
  // Deterministic, in [-1, 1], and without the structure (constant rows) that hides layout bugs.
  const at::Tensor x =
      at::arange(key.rows * key.in, at::TensorOptions().dtype(at::kFloat)).mul(0.618034).sin();
  const at::Tensor x2 = x.reshape({key.rows, key.in});
  const std::vector<at::Tensor> operands =
      b.defined() ? std::vector<at::Tensor>{x2, w, b} : std::vector<at::Tensor>{x2, w};
  const at::Tensor ref = at::linear(x2, w, b);  // also ATen's warm call
  std::vector<at::Tensor> packed;
  at::Tensor got;
  try {
    packed = to_mkldnn_operands(operands);
    got = run_mkldnn_linear(operands, packed);  // also oneDNN's warm call
    const std::string wrong = check(x2, w, b, got, ref);
    if (!wrong.empty()) d.why = "discarded, " + wrong;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, std::min<size_t>(what.find('\n'), 80));
    d.why = "discarded, threw: " + what;
  }
  if (!d.why.empty()) return d;
  std::vector<double> aten, onednn;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    if (round >= 1 && Ms(std::chrono::steady_clock::now() - t0).count() > kShapeMs) break;
    aten.push_back(time_ms([&] { at::linear(x2, w, b); }));
    onednn.push_back(time_ms([&] { run_mkldnn_linear(operands, packed); }));
  }
  d.aten_ms = median(aten);
  d.onednn_ms = median(onednn);
  d.onednn = d.onednn_ms < d.aten_ms;
  return d;
}

std::string describe(const ShapeKey& key, const Decision& d) {
  if (d.why.empty())
    return fmt::format("{}: aten {:.2f}, mkldnn {:.2f} ms", key.str(), d.aten_ms, d.onednn_ms);
  return fmt::format("{}: {}", key.str(),
                     d.why == "tiny" || d.why == "budget" ? d.why + ", aten" : "mkldnn " + d.why);
}

// The shape of an auto candidate: an oneDNN-able linear whose weight and bias are parameters.
std::optional<ShapeKey> shape_of(const Graph& g, const Node& n, int threads) {
  if (!takes_mkldnn_linear(g, n)) return std::nullopt;
  for (size_t o = 1; o < n.operands.size(); ++o) {
    if (g.value(n.operands[o]).kind != ValueKind::kParam) return std::nullopt;
  }
  const Shape& xs = g.value(n.operands[0]).type.shape;
  const Shape& ws = g.value(n.operands[1]).type.shape;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < xs.size(); ++d) rows *= xs[d];
  return ShapeKey{rows, ws[1], ws[0], n.operands.size() > 2, threads};
}

}  // namespace

std::optional<LinearSetting> parse_linear_setting(const std::string& value) {
  if (value == "aten" || value == "default") return LinearSetting::kAten;
  if (value == "mkldnn") return LinearSetting::kMkldnn;
  if (value == "auto") return LinearSetting::kAuto;
  return std::nullopt;
}

LinearPlan plan_linears(const Graph& g, const std::vector<at::Tensor>& params,
                        LinearSetting setting, int threads) {
  LinearPlan plan;
  if (setting == LinearSetting::kAten) return plan;
  if (setting == LinearSetting::kMkldnn) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (takes_mkldnn_linear(g, g.nodes()[i])) plan.onednn_nodes.insert(i);
    }
    return plan;
  }
  if (threads > 0) use_openmp_threads(threads);  // timed on the run's threads
  const int team = omp_get_max_threads();
  std::map<ValueId, size_t> param_index;
  for (size_t k = 0; k < g.params().size(); ++k) param_index[g.params()[k]] = k;
  std::map<ShapeKey, std::vector<size_t>> nodes_of;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (auto key = shape_of(g, g.nodes()[i], team)) nodes_of[*key].push_back(i);
  }
  if (nodes_of.empty()) return plan;
  std::vector<ShapeKey> order;
  for (const auto& [key, nodes] : nodes_of) order.push_back(key);
  std::stable_sort(order.begin(), order.end(),
                   [](const ShapeKey& a, const ShapeKey& b) { return a.macs() > b.macs(); });
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::filesystem::path file = choices_file(kChoicesName);
  if (!file.empty()) load_choices(file);
  bool decided = false;
  double spent = 0;
  int onednn_shapes = 0;
  std::vector<std::string> lines;
  for (const ShapeKey& key : order) {
    Decision d;
    if (auto it = g_decisions.find(key); it != g_decisions.end()) {
      d = it->second;
    } else if (key.macs() < kMinMacs) {
      d.why = "tiny";
      g_decisions.emplace(key, d);
      decided = true;
    } else if (spent > kBudgetMs) {
      // Kept: a later compile (the warm one, the timing worker's) with budget left must not time
      // it and take another path than the one profiled.
      d.why = "budget";
      g_decisions.emplace(key, d);
      decided = true;
    } else {
      const Node& n = g.nodes()[nodes_of[key].front()];
      const at::Tensor& w = params[param_index.at(n.operands[1])];
      const at::Tensor b = key.bias ? params[param_index.at(n.operands[2])] : at::Tensor();
      spent += time_ms([&] { d = measure(key, w, b); });
      g_decisions.emplace(key, d);
      decided = true;
    }
    lines.push_back(describe(key, d));
    if (!d.onednn) continue;
    ++onednn_shapes;
    plan.onednn_nodes.insert(nodes_of[key].begin(), nodes_of[key].end());
  }
  if (decided && !file.empty()) save_choices(file);
  plan.summary = fmt::format("linear auto: mkldnn for {} of {} shapes ({})", onednn_shapes,
                             order.size(), fmt::join(lines, "; "));
  return plan;
}

}  // namespace crucible::libtorch
