// Multi-head attention as the transformer models write it: split heads, QK^T scaled by
// 1/sqrt(head_dim), an optional causal mask, softmax, weighted sum of values, merge heads.
#include <cmath>
#include <limits>

#include "models.h"

namespace crucible::models {

namespace {
ValueId split_heads(NetBuilder& b, ValueId x, int64_t heads) {
  const Shape& s = b.shape(x);
  return b.permute(b.reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}
}  // namespace

ValueId multi_head_attention(NetBuilder& b, ValueId q, ValueId k, ValueId v, int64_t heads,
                             bool causal) {
  const int64_t batch = b.shape(q)[0], seq = b.shape(q)[1], width = b.shape(v)[2];
  const int64_t head_dim = b.shape(q)[2] / heads;
  ValueId qh = split_heads(b, q, heads), kh = split_heads(b, k, heads),
          vh = split_heads(b, v, heads);
  ValueId scores = b.op("matmul", {qh, b.transpose(kh, -1, -2)});
  scores = b.mul(scores, b.scalar(1.0 / std::sqrt(static_cast<double>(head_dim))));
  if (causal) {
    ValueId pos = b.op("arange", {}, {{"end", static_cast<double>(seq)}, {"dtype", DType::kI64}});
    ValueId visible = b.op("ge", {b.op("unsqueeze", {pos}, {{"dim", int64_t{1}}}),
                                  b.op("unsqueeze", {pos}, {{"dim", int64_t{0}}})});
    scores = b.op("where", {visible, scores, b.scalar(std::numeric_limits<float>::lowest())});
  }
  ValueId probs = b.op("softmax", {scores}, {{"dim", int64_t{-1}}});
  ValueId ctx = b.permute(b.op("matmul", {probs, vh}), {0, 2, 1, 3});
  return b.reshape(ctx, {batch, seq, width});
}

}  // namespace crucible::models
