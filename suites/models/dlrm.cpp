// A DLRM-like recommender with TorchBench's dlrm dimensions: a bottom MLP over dense features,
// sum-pooled embedding-bag lookups, pairwise dot interactions (strictly lower triangle) and a top
// MLP ending in a sigmoid. Weights follow the DLRM reference's init.
#include <cmath>

#include "models.h"

namespace crucible::models {

namespace {

struct DlrmConfig {
  std::vector<int64_t> bottom;  // dense width first, embedding dim last
  std::vector<int64_t> top;     // after the interaction width
  int64_t tables, rows, lookups;
};

// DLRM's MLP: N(0, sqrt(2/(in+out))) weights, N(0, sqrt(1/out)) biases; ReLU after every layer but
// a last one that ends in a sigmoid.
ValueId mlp(NetBuilder& b, ValueId x, const std::vector<int64_t>& dims, bool sigmoid_last) {
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    auto s = b.scope(static_cast<int64_t>(2 * i));
    const int64_t in = dims[i], out = dims[i + 1];
    ValueId w = b.normal_param("weight", {out, in}, std::sqrt(2.0 / static_cast<double>(in + out)));
    ValueId bias = b.normal_param("bias", {out}, std::sqrt(1.0 / static_cast<double>(out)));
    x = b.op("linear", {x, w, bias});
    x = sigmoid_last && i + 2 == dims.size() ? b.op("sigmoid", {x}) : b.relu(x);
  }
  return x;
}

}  // namespace

Graph build_dlrm(const BuildOptions& o) {
  const bool full = o.variant == Variant::kFull;
  const DlrmConfig c = full ? DlrmConfig{{512, 512, 64}, {1024, 1024, 1024, 1}, 8, 1000000, 100}
                            : DlrmConfig{{16, 32, 16}, {32, 1}, 4, 1000, 4};
  const int64_t batch = o.batch_size, dim = c.bottom.back();
  NetBuilder b("dlrm");
  ValueId dense = b.input("dense_x", DType::kF32, {batch, c.bottom.front()});
  std::vector<ValueId> ids;
  for (int64_t t = 0; t < c.tables; ++t) {
    ids.push_back(b.input("lS_i." + std::to_string(t), DType::kI64, {batch, c.lookups},
                          Initializer{"randint", {{"low", int64_t{0}}, {"high", c.rows}}}));
  }
  ValueId x;
  {
    auto s = b.scope("bot_l");
    x = mlp(b, dense, c.bottom, /*sigmoid_last=*/false);
  }
  std::vector<ValueId> features{b.op("unsqueeze", {x}, {{"dim", int64_t{1}}})};
  {
    auto s = b.scope("emb_l");
    const double bound = std::sqrt(1.0 / static_cast<double>(c.rows));
    for (int64_t t = 0; t < c.tables; ++t) {
      auto e = b.scope(t);
      ValueId table = b.uniform_param("weight", {c.rows, dim}, -bound, bound);
      // EmbeddingBag(mode="sum"): gather the bag's rows, then add them up.
      ValueId bag = b.op("sum", {b.op("embedding", {table, ids[t]})},
                         {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
      features.push_back(bag);
    }
  }
  // Dot interaction: every pair of the (1 + tables) feature vectors, below the diagonal only.
  ValueId t = b.cat(features, 1);
  ValueId z = b.op("matmul", {t, b.transpose(t, 1, 2)}, {}, "interaction");
  std::vector<ValueId> parts{x};
  for (int64_t i = 1; i <= c.tables; ++i) {
    ValueId row = b.slice(b.slice(z, 1, i, i + 1), 2, 0, i);
    parts.push_back(b.reshape(row, {batch, i}));
  }
  ValueId r = b.cat(parts, 1);
  std::vector<int64_t> top{dim + c.tables * (c.tables + 1) / 2};
  top.insert(top.end(), c.top.begin(), c.top.end());
  auto s = b.scope("top_l");
  return b.finish({mlp(b, r, top, /*sigmoid_last=*/true)});
}

}  // namespace crucible::models
