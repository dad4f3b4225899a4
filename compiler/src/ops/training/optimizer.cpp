// The optimizers' updates in registry ops, as torch.optim computes them: SGD with momentum
// (buf = momentum * buf + g, first step buf = g as zeros make it) and AdamW (decoupled decay,
// bias-corrected moments; the second moment held as its square root, see training.h).
#include <fmt/format.h>

#include <cmath>

#include "autodiff/grad_builder.h"
#include "training/training_internal.h"

namespace crucible::training {

namespace {

// Updates built with scalars of the parameter's dtype, each node named after the parameter.
class UpdateBuilder {
 public:
  UpdateBuilder(Graph& g, const Trained& p, int t)
      : g_(g), prefix_(fmt::format("s{}.{}.", t, p.name)) {}

  ValueId op(const std::string& name, std::vector<ValueId> operands, const std::string& what) {
    return g_.add_node(name, std::move(operands), {}, free_name(g_, prefix_ + what));
  }
  ValueId times(ValueId a, double c, const std::string& what) {
    const ValueId s = autodiff::filled(g_, {}, c, g_.value(a).type.dtype);
    return op("mul", {a, s}, what);
  }
  ValueId plus(ValueId a, double c, const std::string& what) {
    const ValueId s = autodiff::filled(g_, {}, c, g_.value(a).type.dtype);
    return op("add", {a, s}, what);
  }

 private:
  Graph& g_;
  std::string prefix_;  // "s3.fc1.weight.": step 3's update of fc1.weight
};

void sgd(Graph& g, const OptimizerOptions& o, int t, ValueId grad, Trained& p) {
  UpdateBuilder b(g, p, t);
  ValueId d = grad;
  if (o.decay() != 0) d = b.op("add", {d, b.times(p.value, o.decay(), "l2")}, "decayed_grad");
  if (o.momentum != 0) {
    d = b.op("add", {b.times(p.state[0], o.momentum, "momentum_kept"), d}, "momentum");
    p.state[0] = d;
  }
  p.value = b.op("sub", {p.value, b.times(d, o.lr, "step")}, "updated");
}

void adamw(Graph& g, const OptimizerOptions& o, int t, ValueId grad, Trained& p) {
  UpdateBuilder b(g, p, t);
  const double bias1 = 1 - std::pow(o.beta1, t);
  const double bias2 = 1 - std::pow(o.beta2, t);
  ValueId w = p.value;
  if (o.decay() != 0) w = b.times(w, 1 - o.lr * o.decay(), "decayed");
  const ValueId m = b.op(
      "add",
      {b.times(p.state[0], o.beta1, "exp_avg_kept"), b.times(grad, 1 - o.beta1, "exp_avg_new")},
      "exp_avg");
  const ValueId s_sq = b.op("mul", {p.state[1], p.state[1]}, "exp_avg_sq_old");
  const ValueId g_sq = b.op("mul", {grad, grad}, "grad_sq");
  const ValueId v = b.op(
      "add",
      {b.times(s_sq, o.beta2, "exp_avg_sq_kept"), b.times(g_sq, 1 - o.beta2, "exp_avg_sq_new")},
      "exp_avg_sq");
  const ValueId rms = b.op("sqrt", {v}, "exp_avg_rms");
  const ValueId denom = b.plus(b.times(rms, 1 / std::sqrt(bias2), "rms_corrected"), o.eps, "denom");
  const ValueId ratio = b.op("div", {m, denom}, "ratio");
  p.value = b.op("sub", {w, b.times(ratio, o.lr / bias1, "step")}, "updated");
  p.state = {m, rms};
}

}  // namespace

std::vector<std::string> state_names(const OptimizerOptions& o) {
  if (o.kind == OptimizerKind::kAdamW) return {"exp_avg", "exp_avg_rms"};
  if (o.momentum != 0) return {"momentum"};
  return {};
}

void add_update(Graph& g, const OptimizerOptions& o, int t, ValueId grad, Trained& p) {
  if (o.kind == OptimizerKind::kAdamW) {
    adamw(g, o, t, grad, p);
  } else {
    sgd(g, o, t, grad, p);
  }
}

}  // namespace crucible::training
