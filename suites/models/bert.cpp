// BERT-base's encoder stack (HF BertEncoder): 12 post-norm layers of 12-head self-attention and a
// GELU feed-forward, hidden 768, sequence 128; the small variant keeps the shape at a tenth.
#include "models.h"

namespace crucible::models {

namespace {
struct BertConfig {
  int64_t layers, hidden, heads, intermediate, seq;
};
constexpr double kBertStd = 0.02;  // HF's initializer_range
constexpr double kBertEps = 1e-12;
}  // namespace

Graph build_bert_base(const BuildOptions& o) {
  const BertConfig c = o.variant == Variant::kFull ? BertConfig{12, 768, 12, 3072, 128}
                                                   : BertConfig{2, 128, 2, 512, 32};
  NetBuilder b("bert_base");
  ValueId h = b.input("hidden_states", DType::kF32, {o.batch_size, c.seq, c.hidden});
  auto enc = b.scope("encoder");
  for (int64_t i = 0; i < c.layers; ++i) {
    auto layer = b.scope("layer." + std::to_string(i));
    ValueId attn;
    {
      auto s = b.scope("attention");
      ValueId q = b.linear(h, c.hidden, c.hidden, true, kBertStd, "self.query");
      ValueId k = b.linear(h, c.hidden, c.hidden, true, kBertStd, "self.key");
      ValueId v = b.linear(h, c.hidden, c.hidden, true, kBertStd, "self.value");
      ValueId ctx = multi_head_attention(b, q, k, v, c.heads, /*causal=*/false);
      ValueId proj = b.linear(ctx, c.hidden, c.hidden, true, kBertStd, "output.dense");
      attn = b.layer_norm(b.add(proj, h), c.hidden, kBertEps, "output.LayerNorm");
    }
    ValueId inter = b.op(
        "gelu", {b.linear(attn, c.hidden, c.intermediate, true, kBertStd, "intermediate.dense")});
    ValueId out = b.linear(inter, c.intermediate, c.hidden, true, kBertStd, "output.dense");
    h = b.layer_norm(b.add(out, attn), c.hidden, kBertEps, "output.LayerNorm");
  }
  return b.finish({h});
}

}  // namespace crucible::models
