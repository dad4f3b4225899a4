// GPT-2 small (HF GPT2LMHeadModel): token and position embeddings, 12 pre-norm decoder blocks with
// causal attention and tanh-GELU MLPs, final LayerNorm and an LM head tied to the token embedding.
#include <cmath>

#include "models.h"

namespace crucible::models {

namespace {
struct Gpt2Config {
  int64_t vocab, positions, layers, hidden, heads, seq;
};
constexpr double kGpt2Std = 0.02;
constexpr double kGpt2Eps = 1e-5;
}  // namespace

Graph build_gpt2(const BuildOptions& o) {
  const Gpt2Config c = o.variant == Variant::kFull ? Gpt2Config{50257, 1024, 12, 768, 12, 128}
                                                   : Gpt2Config{1000, 64, 2, 128, 2, 32};
  // GPT-2 scales the residual projections' init by 1/sqrt(2 * layers).
  const double proj_std = kGpt2Std / std::sqrt(2.0 * static_cast<double>(c.layers));
  NetBuilder b("gpt2");
  ValueId ids = b.input("input_ids", DType::kI64, {o.batch_size, c.seq},
                        Initializer{"randint", {{"low", int64_t{0}}, {"high", c.vocab}}});
  ValueId wte, h;
  {
    auto t = b.scope("transformer");
    wte = b.normal_param("wte.weight", {c.vocab, c.hidden}, kGpt2Std);
    ValueId wpe = b.normal_param("wpe.weight", {c.positions, c.hidden}, kGpt2Std);
    h = b.add(b.op("embedding", {wte, ids}), b.slice(wpe, 0, 0, c.seq));
    for (int64_t i = 0; i < c.layers; ++i) {
      auto block = b.scope("h." + std::to_string(i));
      ValueId a = b.layer_norm(h, c.hidden, kGpt2Eps, "ln_1");
      ValueId qkv = b.linear(a, c.hidden, 3 * c.hidden, true, kGpt2Std, "attn.c_attn");
      ValueId q = b.slice(qkv, 2, 0, c.hidden), k = b.slice(qkv, 2, c.hidden, 2 * c.hidden),
              v = b.slice(qkv, 2, 2 * c.hidden, 3 * c.hidden);
      ValueId ctx = multi_head_attention(b, q, k, v, c.heads, /*causal=*/true);
      h = b.add(h, b.linear(ctx, c.hidden, c.hidden, true, proj_std, "attn.c_proj"));
      ValueId m = b.layer_norm(h, c.hidden, kGpt2Eps, "ln_2");
      m = b.op("gelu", {b.linear(m, c.hidden, 4 * c.hidden, true, kGpt2Std, "mlp.c_fc")},
               {{"approximate", std::string("tanh")}});
      h = b.add(h, b.linear(m, 4 * c.hidden, c.hidden, true, proj_std, "mlp.c_proj"));
    }
    h = b.layer_norm(h, c.hidden, kGpt2Eps, "ln_f");
  }
  ValueId logits = b.op("linear", {h, wte}, {}, "lm_head");  // tied: no parameter of its own
  return b.finish({logits});
}

}  // namespace crucible::models
