// Internal seams of the vision op family (conv2d, the 2-D pools, batch_norm): each file's
// registration function and the convolution back ends the conv2d kernel dispatches to.
#pragma once

#include <cstdint>

#include "conv/conv_epilogue.h"
#include "crucible/ir/op_registry.h"
#include "vision/window_geometry.h"

namespace crucible::vision {

void register_conv_ops(OpRegistry& r);            // conv2d
void register_pool_ops(OpRegistry& r);            // max_pool2d, avg_pool2d, adaptive_avg_pool2d
void register_batch_norm_ops(OpRegistry& r);      // batch_norm
void register_conv_transpose_ops(OpRegistry& r);  // conv_transpose2d
void register_resize_ops(OpRegistry& r);          // resize

// One conv2d problem: input [n, c, h, w], weight [o, c/groups, kh, kw], output [n, o, oh, ow].
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  ConvParams p;
};

// One conv_transpose2d problem: input [n, c, h, w], weight [c, o/groups, kh, kw], output
// [n, o, oh, ow].
struct DeconvShape {
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  ConvParams p;
  Hw output_padding{0, 0};
};

// y = conv_transpose(x, w) + bias over contiguous NCHW / IOHW buffers (bias may be null) by
// oneDNN's deconvolution; false (y untouched) for a problem it does not take, which the direct
// loop then computes.
bool conv_transpose2d_f32(const DeconvShape& s, const float* x, const float* w, const float* bias,
                          float* y);

// The problem a conv2d with these operand types (input, weight[, bias]) and attributes describes,
// validated as the op's type rule does. Throws Error with the reason.
ConvShape conv_shape(std::span<const TensorType> in, const Attrs& attrs);

// y = conv(x, w) + bias over contiguous NCHW / OIHW buffers (bias may be null). Every dim of x and
// w is non-empty. f32 runs oneDNN's convolution primitive; f64 (the accuracy reference) our own
// im2col + blocked GEMM, accumulating in double.
void conv2d_f32(const ConvShape& s, const float* x, const float* w, const float* bias, float* y);
void conv2d_f64(const ConvShape& s, const double* x, const double* w, const double* bias,
                double* y);
// The same for one input channel per group (depthwise, any channel multiplier), T = float or
// double, accumulating in T. A fused caller's epilogue (residual add, activation) is applied to
// each output row while it is in L1.
template <typename T>
void conv2d_depthwise(const ConvShape& s, const T* x, const T* w, const T* bias, T* y,
                      const RowEpilogue<T>& epilogue = {});
// Depthwise with one output channel per input channel on channels-last (NHWC) x, y and residual,
// f32: `w_taps` is the weight tap-major, [kh][kw][C]. Each output pixel folds its window's channel
// vectors, then the epilogue runs on that pixel's C values.
void conv2d_depthwise_nhwc(const ConvShape& s, const float* x, const float* w_taps,
                           const float* bias, float* y, const RowEpilogue<float>& epilogue);
// The same on nChw8c x, y and residual ([N][C/8][H][W][8], C divisible by 8): `w_blocks` is
// [C/8][kh][kw][8]. Each block of 8 channels is an NHWC image of 8 channels for that loop.
void conv2d_depthwise_nchw8c(const ConvShape& s, const float* x, const float* w_blocks,
                             const float* bias, float* y, const RowEpilogue<float>& epilogue);
// The same on NCHW x, y and residual (w: [C][kh][kw]) through that loop: each image's channels,
// 16 at a time, are laid [H][W][16] in a tile, and the output rows transposed back. For small
// planes, where the NCHW loop's vectors run along rows of 7 or 14 outputs (EfficientNet's later
// stages).
void conv2d_depthwise_channel_blocks(const ConvShape& s, const float* x, const float* w,
                                     const float* bias, float* y,
                                     const RowEpilogue<float>& epilogue);

}  // namespace crucible::vision
