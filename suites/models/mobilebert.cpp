// MobileBERT (HF MobileBertForQuestionAnswering, the Inductor CPU tutorial's model): trigram
// embeddings, 24 bottlenecked layers (hidden 512, bottleneck 128, four ReLU feed-forwards, NoNorm)
// and a start/end logits head; 362 linears per forward, as the tutorial's profile counts.
#include "models.h"

namespace crucible::models {

namespace {
struct MobileBertConfig {
  int64_t vocab, positions, layers, hidden, bottleneck, intermediate, heads, ffns, embed, seq;
};
constexpr double kMobileBertStd = 0.02;

// MobileBERT's NoNorm: an elementwise affine map in place of LayerNorm. Its weights are drawn near
// HF's (1, 0) init so that a dropped or swapped NoNorm changes the values.
ValueId no_norm(NetBuilder& b, ValueId x, int64_t dim, const std::string& name) {
  auto s = b.scope(name);
  ValueId w = b.uniform_param("weight", {dim}, 0.9, 1.1);
  ValueId bias = b.uniform_param("bias", {dim}, -0.1, 0.1);
  return b.add(b.mul(x, w), bias);
}
}  // namespace

Graph build_mobilebert(const BuildOptions& o) {
  const MobileBertConfig c = o.variant == Variant::kFull
                                 ? MobileBertConfig{30522, 512, 24, 512, 128, 512, 4, 4, 128, 128}
                                 : MobileBertConfig{1000, 64, 2, 128, 32, 128, 2, 4, 32, 32};
  NetBuilder b("mobilebert");
  const int64_t batch = o.batch_size;
  ValueId ids = b.input("input_ids", DType::kI64, {batch, c.seq},
                        Initializer{"randint", {{"low", int64_t{0}}, {"high", c.vocab}}});
  ValueId types = b.input("token_type_ids", DType::kI64, {batch, c.seq},
                          Initializer{"randint", {{"low", int64_t{0}}, {"high", int64_t{2}}}});
  ValueId h;
  {
    auto s = b.scope("mobilebert.embeddings");
    ValueId e = b.embedding(ids, c.vocab, c.embed, kMobileBertStd, "word_embeddings");
    // Trigram input: each position sees its successor, itself and its predecessor (zero-padded).
    ValueId zero =
        b.op("full", {}, {{"shape", std::vector<int64_t>{batch, 1, c.embed}}, {"value", 0.0}});
    ValueId next = b.cat({b.slice(e, 1, 1, c.seq), zero}, 1);
    ValueId prev = b.cat({zero, b.slice(e, 1, 0, c.seq - 1)}, 1);
    ValueId tri = b.cat({next, e, prev}, 2);
    h = b.linear(tri, 3 * c.embed, c.hidden, true, kMobileBertStd, "embedding_transformation");
    ValueId pos =
        b.normal_param("position_embeddings.weight", {c.positions, c.hidden}, kMobileBertStd);
    h = b.add(h, b.slice(pos, 0, 0, c.seq));
    h = b.add(h, b.embedding(types, 2, c.hidden, kMobileBertStd, "token_type_embeddings"));
    h = no_norm(b, h, c.hidden, "LayerNorm");
  }
  for (int64_t i = 0; i < c.layers; ++i) {
    auto layer = b.scope("mobilebert.encoder.layer." + std::to_string(i));
    ValueId layer_input, shared;
    {
      auto s = b.scope("bottleneck");
      layer_input =
          no_norm(b, b.linear(h, c.hidden, c.bottleneck, true, kMobileBertStd, "input.dense"),
                  c.bottleneck, "input.LayerNorm");
      shared =
          no_norm(b, b.linear(h, c.hidden, c.bottleneck, true, kMobileBertStd, "attention.dense"),
                  c.bottleneck, "attention.LayerNorm");
    }
    ValueId x;
    {
      auto s = b.scope("attention");
      // Query and key share the bottlenecked input; value reads the full-width hidden state.
      ValueId q = b.linear(shared, c.bottleneck, c.bottleneck, true, kMobileBertStd, "self.query");
      ValueId k = b.linear(shared, c.bottleneck, c.bottleneck, true, kMobileBertStd, "self.key");
      ValueId v = b.linear(h, c.hidden, c.bottleneck, true, kMobileBertStd, "self.value");
      ValueId ctx = multi_head_attention(b, q, k, v, c.heads, /*causal=*/false);
      ValueId proj =
          b.linear(ctx, c.bottleneck, c.bottleneck, true, kMobileBertStd, "output.dense");
      x = no_norm(b, b.add(proj, layer_input), c.bottleneck, "output.LayerNorm");
    }
    for (int64_t f = 0; f + 1 < c.ffns; ++f) {
      auto s = b.scope("ffn." + std::to_string(f));
      ValueId in = b.relu(
          b.linear(x, c.bottleneck, c.intermediate, true, kMobileBertStd, "intermediate.dense"));
      ValueId out =
          b.linear(in, c.intermediate, c.bottleneck, true, kMobileBertStd, "output.dense");
      x = no_norm(b, b.add(out, x), c.bottleneck, "output.LayerNorm");
    }
    ValueId in = b.relu(
        b.linear(x, c.bottleneck, c.intermediate, true, kMobileBertStd, "intermediate.dense"));
    auto s = b.scope("output");
    ValueId out = b.linear(in, c.intermediate, c.bottleneck, true, kMobileBertStd, "dense");
    out = no_norm(b, b.add(out, x), c.bottleneck, "LayerNorm");
    out = b.linear(out, c.bottleneck, c.hidden, true, kMobileBertStd, "bottleneck.dense");
    h = no_norm(b, b.add(out, h), c.hidden, "bottleneck.LayerNorm");
  }
  ValueId logits = b.linear(h, c.hidden, 2, true, kMobileBertStd, "qa_outputs");
  return b.finish({logits});
}

}  // namespace crucible::models
