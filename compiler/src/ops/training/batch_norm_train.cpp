// batch_norm in a training step, as torch.nn.BatchNorm2d in train(): normalized by the batch's
// statistics (biased variance), and the running statistics moved toward them by momentum 0.1
// (the running variance from the unbiased one), in registry ops so autodiff differentiates it.
#include "autodiff/grad_builder.h"
#include "training/training_internal.h"

namespace crucible::training {

namespace {

constexpr double kMomentum = 0.1;  // torch.nn.BatchNorm's default

}  // namespace

ValueId add_batch_norm_train(Graph& g, const Node& n, const std::vector<ValueId>& operands,
                             const std::string& name, std::vector<BufferUpdate>& updates) {
  const TensorType x = g.value(operands[0]).type;
  const DType dt = x.dtype;
  const int64_t channels = x.shape.at(1);
  std::vector<int64_t> others, per_channel(x.shape.size(), 1);
  per_channel[1] = channels;
  int64_t count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (d == 1) continue;
    others.push_back(static_cast<int64_t>(d));
    count *= x.shape[d];
  }
  const std::string base = name.empty() ? "bn" : name;
  auto node = [&](const std::string& op, std::vector<ValueId> in, Attrs attrs,
                  const std::string& what) {
    return g.add_node(op, std::move(in), std::move(attrs), free_name(g, base + "." + what));
  };
  auto scalar = [&](double v) { return autodiff::filled(g, {}, v, dt); };
  const ValueId mean = node("mean", {operands[0]}, {{"dims", others}, {"keepdim", true}}, "mean");
  const ValueId var =
      node("var", {operands[0]}, {{"dims", others}, {"keepdim", true}, {"correction", int64_t{0}}},
           "var");
  const double eps = n.attrs.get_float_or("eps", 1e-5);
  const ValueId inv = node("rsqrt", {node("add", {var, scalar(eps)}, {}, "var_eps")}, {}, "inv");
  const ValueId xhat =
      node("mul", {node("sub", {operands[0], mean}, {}, "centered"), inv}, {}, "xhat");
  const ValueId w = node("reshape", {operands[1]}, {{"shape", per_channel}}, "w");
  const ValueId b = node("reshape", {operands[2]}, {{"shape", per_channel}}, "b");
  const ValueId y = g.add_node("add", {node("mul", {xhat, w}, {}, "scaled"), b}, {}, name);
  // The running statistics: what the next step (and inference afterwards) reads.
  const std::vector<int64_t> flat = {channels};
  const double unbiased =
      count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  const ValueId batch_mean = node("reshape", {mean}, {{"shape", flat}}, "batch_mean");
  const ValueId batch_var = node("reshape", {var}, {{"shape", flat}}, "batch_var");
  const ValueId rm =
      node("add",
           {node("mul", {operands[3], scalar(1 - kMomentum)}, {}, "running_mean_kept"),
            node("mul", {batch_mean, scalar(kMomentum)}, {}, "running_mean_new")},
           {}, "running_mean");
  const ValueId rv =
      node("add",
           {node("mul", {operands[4], scalar(1 - kMomentum)}, {}, "running_var_kept"),
            node("mul", {batch_var, scalar(kMomentum * unbiased)}, {}, "running_var_new")},
           {}, "running_var");
  updates.push_back({operands[3], rm});
  updates.push_back({operands[4], rv});
  return y;
}

}  // namespace crucible::training
