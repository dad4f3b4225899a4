// A linear layer whose weight is packed once, at compile time, into oneDNN's preferred layout, with
// bias and activation fused into the GEMM: the extern call the codegen backend emits for linear.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "crucible/core/tensor.h"

namespace crucible {

// Activation applied to each output element after the bias (oneDNN eltwise post-op).
enum class Epilogue { kNone, kRelu, kGelu /*erf form*/, kGeluTanh, kSigmoid, kTanh };
const char* epilogue_name(Epilogue e);  // "none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"

// y[M,N] = epilogue(alpha * (x[M,K] @ op(W)) + beta_bias * bias), f32.
// `weight_layout_nk`: W is [N,K] (linear's weight) when true, [K,N] (matmul/addmm's right operand)
// when false. bias is undefined (no bias), [N], or anything that broadcasts to a row of N ([1,N],
// [1], a scalar). alpha is folded into the packed weights and beta_bias into a stored copy of the
// bias; beta_bias == 0 drops the bias entirely, as torch.addmm does. The constructor copies and
// reorders everything it needs: the caller's tensors may die or change afterwards.
//
// `rows_hint`: the row count M most calls will have, when the caller knows it (a compiler with
// static shapes), else 0. The blocked weights are packed in the layout oneDNN's convolution wants
// for that M; without a hint they follow a probe M, and an M whose convolution wants another
// layout runs on a second, plain copy of the weights. A hint below 2 (a gemv, which the plain
// matmul serves) packs only the plain copy.
//
// Copies share the packed weights and the primitive caches (all immutable or internally locked).
class PackedLinear {
 public:
  PackedLinear(const Tensor& weight, bool weight_layout_nk, const Tensor& bias, Epilogue epilogue,
               float alpha = 1.0f, float beta_bias = 1.0f, int64_t rows_hint = 0);

  int64_t in_features() const;   // K
  int64_t out_features() const;  // N
  Epilogue epilogue() const;

  // x: m rows of K floats, row stride ldx (>= K); y: m rows of N floats, row stride ldy (>= N).
  // Only y's first N floats of each row are written. x and y must not overlap.
  // Thread-safe for concurrent calls; runs on OpenMP's current thread count (one thread when
  // called from inside a parallel region). Throws Error for invalid sizes or strides.
  void run(const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy) const;
  // Builds now what run() with these sizes needs (oneDNN JIT-compiles a kernel per batch size,
  // ~0.2 ms each), so a compiler can pay for it at compile time rather than on the first run.
  void prepare(int64_t m, int64_t ldx, int64_t ldy) const;

  // Bytes held for weights and bias, including the plain-layout copy once one has been made.
  size_t packed_bytes() const;
  // e.g. "packed linear 512x512 (oneDNN blocked weights OIw8i8o, jit_1x1:avx2; ...), bias+relu
  // epilogue"
  std::string describe() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace crucible
