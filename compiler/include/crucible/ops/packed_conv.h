// A conv2d whose weights are packed once, at compile time, with a batch norm folded in and a
// residual add and relu/clamp fused as its epilogue: the extern call codegen emits for conv2d.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crucible/core/tensor.h"
#include "crucible/ir/attrs.h"

namespace crucible {

// The activation a packed convolution applies last, with the eager op's formula: relu, clamp, and
// the mobile networks' sigmoid, silu (x * sigmoid(x)), hardsigmoid and hardswish.
enum class ConvActivation { kNone, kRelu, kClamp, kSigmoid, kSilu, kHardsigmoid, kHardswish };

// How a packed convolution's activations lie in memory. All are the logical [N, C, H, W]; kNhwc
// stores channels innermost (PyTorch's channels_last), the layout oneDNN's brgemm kernels (AVX-512)
// read and write directly, so a chain of convolutions that keeps it pays no reorder between them.
// kNchw8c (oneDNN's nChw8c, [N][C/8][H][W][8]) is what its AVX2 direct kernels read and write; it
// needs a channel count divisible by 8 (no padded tail), and is an NHWC image of 8 channels per
// block of channels, so a pool over pixels can treat it as one.
enum class ActivationLayout { kNchw, kNhwc, kNchw8c };
const char* layout_name(ActivationLayout layout);  // "nchw", "nhwc", "nChw8c"

// Which layout chains of dense convolutions should keep on this CPU: kNhwc where oneDNN runs its
// brgemm convolutions (AVX-512 core), kNchw8c elsewhere (measured in docs/design_decisions.md).
ActivationLayout preferred_chain_layout();
struct ConvLayouts {
  ActivationLayout src = ActivationLayout::kNchw;  // x
  ActivationLayout dst = ActivationLayout::kNchw;  // y, and the residual
};

// What PackedConv2d computes after the convolution, in this order (ResNet's
// relu(bn(conv(x)) + identity)):
//   y = activation((conv(x, W) + bias) * scale + shift + residual)
// The affine is folded into the packed weights and bias (W' = W * scale, b' = bias * scale +
// shift), so it costs nothing per call.
struct ConvEpilogue {
  std::vector<double> scale, shift;  // one per output channel, or both empty (no affine)
  bool residual = false;             // run() adds a residual tensor shaped like the output
  ConvActivation activation = ConvActivation::kNone;
  double clamp_min = 0.0, clamp_max = 6.0;  // kClamp's bounds (ReLU6 by default)

  // Inference batch norm as the affine, computed in double: scale = gamma / sqrt(var + eps),
  // shift = beta - mean * scale. Each operand is [O] in any float dtype.
  void fold_batch_norm(const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                       const Tensor& var, double eps);
  // e.g. "bn+add+relu", "relu6", "none"
  std::string name() const;
};

// One input channel per group: PackedConv2d runs it on our own loops (NCHW, or NHWC in and out with
// one output channel per input channel), never on oneDNN; codegen's layout pass asks the same.
inline bool is_depthwise_conv(int64_t channels, int64_t groups) {
  return groups > 1 && groups == channels;
}

// Which algorithm a dense 3x3 stride-1 convolution padded by at most 1 may run. kDirect: oneDNN's
// direct kernels. kWinograd: Winograd F(4x4, 3x3), oneDNN's where it has one (AVX-512), else ours
// (winograd_f4x3.h: 36 GEMMs on packed transformed weights). kFastest: Winograd timed against the
// direct kernel at construction and kept when it takes at most 0.9 of the direct kernel's time
// (it rounds more, so a near tie stays direct). Winograd runs only on inputs whose values
// are all finite and below 2^64 in magnitude (a scan per call; its transforms would spread a NaN
// or an infinity over a tile and could overflow), and only with weights below 2^32: anything else
// takes the direct kernel, so non-finite values propagate as the op's do.
enum class ConvAlgorithm { kDirect, kWinograd, kFastest };

// Copies share the packed weights and the plan cache (immutable or internally locked).
class PackedConv2d {
 public:
  // weight [O, C/groups, kH, kW] and bias ([O] or undefined), f32; `attrs` are conv2d's (stride,
  // padding, dilation, groups; see the op). `input_shape` [N, C, H, W] is the problem the weights
  // are packed for; run() accepts other N, H and W too. Copies everything it needs: the caller's
  // tensors may die or change afterwards. Throws Error for an invalid or empty convolution.
  // `layouts` fixes how run()'s x and y lie in memory; depthwise convolutions (our own loops) take
  // kNchw, or kNhwc in and out when each input channel makes one output channel.
  PackedConv2d(const Tensor& weight, const Tensor& bias, const Attrs& attrs,
               const Shape& input_shape, ConvEpilogue epilogue = {}, ConvLayouts layouts = {},
               ConvAlgorithm algorithm = ConvAlgorithm::kDirect);

  Shape output_shape(const Shape& input_shape) const;
  const ConvEpilogue& epilogue() const;
  const ConvLayouts& layouts() const;
  // Whether run() takes Winograd on `input_shape`'s problem (for finite inputs).
  bool uses_winograd() const;

  // x: contiguous f32 of `input_shape` in layouts().src; y: contiguous, of
  // output_shape(input_shape), in layouts().dst; residual: like y (same layout), given exactly
  // when epilogue().residual. The residual may be y itself (the
  // output then overwrites it in place) but must not overlap it otherwise; x must not overlap y.
  // Thread-safe for concurrent calls; runs on OpenMP's current thread count. Throws Error for a
  // wrong shape or a missing residual.
  void run(const float* x, const Shape& input_shape, float* y,
           const float* residual = nullptr) const;
  // Builds now what run() needs for this input shape (oneDNN JIT-compiles a kernel per problem),
  // so a compiler pays for it at compile time rather than on the first run.
  void prepare(const Shape& input_shape) const;

  // Bytes held for packed weights and bias (every plan's copy, when one needed another layout).
  size_t packed_bytes() const;
  // e.g. "packed conv2d 64->64 3x3 stride 1x1 (oneDNN brgconv:avx512_core, weights ABcd16b16a,
  // blocked activations), bn+relu epilogue as post-ops"
  std::string describe() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace crucible
