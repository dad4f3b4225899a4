// The differential oracle (see differential.h): eager is the reference, the backend must agree.
#include "differential.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "accuracy.h"
#include "crucible/core/error.h"
#include "crucible/ir/op_registry.h"
#include "crucible/ir/transforms.h"
#include "crucible/plugin_loader.h"

namespace crucible::fuzz {

Differential::Differential(const std::string& backend)
    : name_(backend),
      eager_(load_plugin(find_plugin("eager", plugin_search_path({})))),
      backend_(load_plugin(find_plugin(backend, plugin_search_path({})))) {
  if (backend == "codegen") {
    configs_ = {{"codegen", {}}, {"codegen fusion=off", {{"fusion", "off"}}}};
  } else if (backend == "libtorch") {
    configs_ = {{"libtorch eager", {{"mode", "eager"}}}, {"libtorch jit", {{"mode", "jit"}}}};
  } else {
    configs_ = {{backend, {}}};
  }
}

Differential::~Differential() = default;

namespace {
// The float dtypes a value was computed through (its ancestors and itself): a value cast to f64
// after f32 arithmetic carries f32 rounding, so it gets f32's tolerance.
std::set<DType> float_dtypes_upstream(const Graph& g, ValueId v) {
  std::set<DType> out;
  std::vector<ValueId> stack = {v};
  std::set<ValueId> seen;
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    const Value& val = g.value(x);
    if (is_floating(val.type.dtype)) out.insert(val.type.dtype);
    if (val.kind == ValueKind::kNode) {
      for (ValueId o : g.nodes()[static_cast<size_t>(val.node)].operands) stack.push_back(o);
    }
  }
  return out;
}

double tolerance(const std::set<DType>& upstream) {
  if (upstream.contains(DType::kBF16)) return 1e-2;
  if (upstream.contains(DType::kF32)) return 1e-4;
  return 1e-9;
}

// Ops whose every output element is a sum of products of operand elements.
bool accumulates(const std::string& op) {
  static const std::set<std::string> ops = {"sum",   "mean",   "matmul",     "linear",
                                            "addmm", "conv2d", "avg_pool2d", "adaptive_avg_pool2d"};
  return ops.contains(op);
}
// The backend's output with eager's value put back wherever eager itself is off the fp64
// reference (beyond tol relative to it, or not finite where it is finite): there the input
// overflowed the dtype's own arithmetic (a planted 1e30 squared in f32), eager's answer is as
// wrong as any other, and the element cannot judge the backend. Elsewhere the backend is held to
// eager as before.
Tensor judged_where_eager_holds(const Tensor& got, const Tensor& ref, const Tensor& fp64,
                                double tol) {
  if (!fp64.defined() || got.shape() != fp64.shape()) return got.contiguous();
  const std::vector<double> f = fp64.to_doubles(), e = ref.to_doubles();
  std::vector<double> h = got.to_doubles();
  bool changed = false;
  for (size_t i = 0; i < f.size(); ++i) {
    if (!std::isfinite(f[i])) continue;
    const bool eager_off =
        !std::isfinite(e[i]) || std::abs(e[i] - f[i]) > tol * (std::abs(f[i]) + 1);
    if (eager_off && h[i] != e[i]) {
      h[i] = e[i];
      changed = true;
    }
  }
  return changed ? Tensor::from_doubles(got.dtype(), got.shape(), h) : got.contiguous();
}

}  // namespace

int64_t beyond_rounding_bound(const Node& n, const std::vector<Tensor>& ops, const Tensor& have,
                              const Tensor& want, double tol) {
  if (!accumulates(n.op)) return -1;
  std::vector<Tensor> mags;
  for (const Tensor& t : ops)
    mags.push_back(is_floating(t.dtype()) ? run_op("abs", std::vector<Tensor>{t}) : t);
  const std::vector<double> bound = run_op(n.op, mags, n.attrs).to_doubles();
  const std::vector<double> h = have.to_doubles(), w = want.to_doubles();
  int64_t beyond = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(h[i]) && std::isnan(w[i])) continue;
    if (std::isinf(bound[i])) continue;  // no bound left: any result is as right as another
    if (!(std::abs(h[i] - w[i]) <= tol * (std::abs(w[i]) + bound[i]) + tol)) ++beyond;
  }
  return beyond;
}

Verdict Differential::check(const Graph& g, uint64_t seed, bool every_config,
                            const GenOptions& opts,
                            const std::map<std::string, std::string>& extra) {
  Verdict v;
  std::vector<Tensor> inputs, ref, fp64;
  try {
    inputs = random_inputs(g, seed, opts);
    ref = eager_->backend().compile(g, {})->run(inputs);
  } catch (const Error& e) {
    v.valid = false;
    v.why_invalid = e.what();
    return v;
  }
  try {  // the judge of ill-conditioned outputs, as in the harness's accuracy rule
    fp64 = eager_->backend().compile(widen_to_f64(g), {})->run(widen_inputs_to_f64(inputs));
  } catch (const Error&) {
    fp64.clear();  // then the backend must be allclose to eager
  }
  std::vector<std::pair<std::string, plugin::Options>> configs;
  for (const auto& [label, config] : configs_) {
    if (!configs.empty() && !every_config) break;
    plugin::Options o;
    o.config = config;
    for (const auto& [k, val] : extra) o.config[k] = val;
    configs.emplace_back(label, o);
  }
  for (const auto& [label, options] : configs) {
    std::vector<std::string> found;  // this configuration's differing outputs
    std::vector<Tensor> got;
    try {
      got = backend_->backend().compile(g, options)->run(inputs);
    } catch (const std::exception& e) {
      v.mismatches.push_back(fmt::format("{}: failed on a graph eager runs: {}", label, e.what()));
      continue;
    }
    if (got.size() != ref.size()) {
      v.mismatches.push_back(
          fmt::format("{}: {} outputs, eager {}", label, got.size(), ref.size()));
      continue;
    }
    for (size_t i = 0; i < ref.size(); ++i) {
      const std::string name = g.value(g.outputs()[i]).name;
      if (got[i].dtype() != ref[i].dtype() || got[i].shape() != ref[i].shape()) {
        v.mismatches.push_back(fmt::format("{}: output %{} is {}{}, eager {}{}", label, name,
                                           dtype_name(got[i].dtype()), shape_str(got[i].shape()),
                                           dtype_name(ref[i].dtype()), shape_str(ref[i].shape())));
        continue;
      }
      const std::set<DType> upstream = float_dtypes_upstream(g, g.outputs()[i]);
      AccuracyOptions o;
      o.tol = tolerance(upstream);
      const Tensor judge = i < fp64.size() && is_floating(ref[i].dtype()) ? fp64[i] : Tensor();
      const Tensor have = judged_where_eager_holds(got[i], ref[i], judge, o.tol);
      const auto a = compare_output(have, ref[i].contiguous(), judge, o);
      // An integer or bool decided from float values (a cast, a comparison) may flip where the
      // float differs by a rounding the tolerance allows; a few such elements are counted apart,
      // more than that is a mismatch.
      if (a.mismatches > 0 && !is_floating(ref[i].dtype()) && !upstream.empty() &&
          a.mismatches <= std::max<int64_t>(1, ref[i].numel() / 100)) {
        v.rounding_flips += a.mismatches;
        continue;
      }
      if (is_floating(ref[i].dtype()) ? !a.passed : a.mismatches > 0) {
        const int64_t at = std::max<int64_t>(a.first_mismatch, 0);
        found.push_back(fmt::format(
            "{}: output %{} {}{}: {} of {} elements differ, first at {} ({} {}, eager {}); "
            "RMSE vs fp64 {:.3g}, eager's {:.3g}",
            label, name, dtype_name(ref[i].dtype()), shape_str(ref[i].shape()), a.mismatches,
            ref[i].numel(), at, name_, ref[i].numel() ? got[i].contiguous().get(at) : 0.0,
            ref[i].numel() ? ref[i].contiguous().get(at) : 0.0, a.rmse_vs_fp64,
            a.rmse_eager_vs_fp64));
      }
    }
    if (found.empty()) continue;
    // Outputs differ: find the first node whose own result differs from eager's kernel run on
    // the backend's own operand values. None: a rounding difference amplified downstream (pow of a
    // value near 0, a layer_norm of nearly equal values), which is no bug of either backend.
    const std::string local = first_local_difference(g, inputs, options);
    if (local.empty()) {
      ++v.amplified;
      continue;
    }
    for (std::string& f : found) v.mismatches.push_back(std::move(f));
    v.mismatches.push_back(fmt::format("{}: {}", label, local));
  }
  return v;
}

std::string Differential::first_local_difference(const Graph& g, const std::vector<Tensor>& inputs,
                                                 const plugin::Options& options) {
  std::vector<ValueId> nodes;
  for (const Node& n : g.nodes()) nodes.push_back(n.output);
  std::vector<Tensor> vals;
  try {
    vals = backend_->backend().compile(g, options)->intermediates(inputs, nodes);
  } catch (const std::exception& e) {
    return fmt::format("intermediates failed: {}", e.what());
  }
  std::vector<Tensor> env(g.values().size());
  for (size_t k = 0; k < inputs.size(); ++k) env[static_cast<size_t>(g.inputs()[k])] = inputs[k];
  for (ValueId p : g.params()) env[static_cast<size_t>(p)] = materialize_param(g, p);
  for (size_t i = 0; i < nodes.size(); ++i) env[static_cast<size_t>(nodes[i])] = vals.at(i);
  for (const Node& n : g.nodes()) {
    std::vector<Tensor> ops;
    for (ValueId o : n.operands) ops.push_back(env[static_cast<size_t>(o)]);
    const Tensor want = run_op(n.op, ops, n.attrs);
    const Tensor& have = env[static_cast<size_t>(n.output)];
    AccuracyOptions o;
    o.tol = tolerance({want.dtype()});
    const auto a = compare_output(have.contiguous(), want.contiguous(), Tensor(), o);
    if (a.mismatches > 0 && beyond_rounding_bound(n, ops, have, want, o.tol) != 0) {
      const int64_t at = std::max<int64_t>(a.first_mismatch, 0);
      return fmt::format(
          "first differing node %{} = {}: {} of {} elements, first at {} ({} {}, eager's "
          "kernel on its operands {})",
          g.value(n.output).name, n.op, a.mismatches, want.numel(), at, name_,
          have.contiguous().get(at), want.contiguous().get(at));
    }
  }
  return "";
}

}  // namespace crucible::fuzz
