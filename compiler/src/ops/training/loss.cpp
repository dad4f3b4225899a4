// The losses a training graph ends its forward with, in registry ops: cross-entropy as
// log_softmax, the labels' entries picked by gather_elements and their negated mean; MSE as the
// mean of the squared difference.
#include <fmt/format.h>

#include "crucible/core/error.h"
#include "training/training_internal.h"

namespace crucible::training {

ValueId add_target(Graph& g, LossKind kind, const TensorType& prediction) {
  if (kind == LossKind::kMse) return g.add_input("target", prediction, {"randn", {}});
  Shape labels(prediction.shape.begin(), prediction.shape.end() - 1);
  const int64_t classes = prediction.shape.back();
  return g.add_input("target", {DType::kI64, labels},
                     {"randint", {{"low", int64_t{0}}, {"high", classes}}});
}

ValueId add_loss(Graph& g, LossKind kind, ValueId prediction, ValueId target,
                 const std::string& name) {
  const TensorType t = g.value(prediction).type;
  if (kind == LossKind::kMse) {
    const ValueId diff = g.add_node("sub", {prediction, target}, {}, free_name(g, "loss_diff"));
    const ValueId sq = g.add_node("mul", {diff, diff}, {}, free_name(g, "loss_sq"));
    return g.add_node("mean", {sq}, {}, name);
  }
  const int64_t classes = t.shape.back();
  const int64_t rows = t.numel() / classes;
  const ValueId flat =
      g.add_node("reshape", {prediction}, {{"shape", std::vector<int64_t>{rows, classes}}},
                 free_name(g, "loss_logits"));
  const ValueId logp =
      g.add_node("log_softmax", {flat}, {{"dim", int64_t{1}}}, free_name(g, "loss_logp"));
  const ValueId labels = g.add_node("reshape", {target}, {{"shape", std::vector<int64_t>{rows, 1}}},
                                    free_name(g, "loss_labels"));
  const ValueId picked = g.add_node("gather_elements", {logp, labels}, {{"dim", int64_t{1}}},
                                    free_name(g, "loss_picked"));
  const ValueId mean = g.add_node("mean", {picked}, {}, free_name(g, "loss_mean"));
  return g.add_node("neg", {mean}, {}, name);
}

}  // namespace crucible::training
