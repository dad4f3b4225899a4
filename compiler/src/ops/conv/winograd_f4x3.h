// Winograd F(4x4, 3x3) of our own for dense 3x3 stride-1 convolutions on CPUs where oneDNN has
// none (its jit_wino_4x3 needs AVX-512): transforms on vectors of 8 channels, 36 packed GEMMs.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "conv/conv_epilogue.h"
#include "crucible/ops/packed_conv.h"
#include "crucible/ops/packed_linear.h"
#include "vision/vision_internal.h"

namespace crucible::vision {

// y = activation(conv(x, W) + bias + residual) by Lavin and Gray's F(4x4, 3x3): each 6x6 input
// tile and each 3x3 filter go to the 6x6 transform domain, where the convolution is 36 products of
// [tiles x C] by [C x O] matrices (PackedLinear, weights transformed and packed once), and each
// 4x4 output tile comes back with the epilogue applied while it is in registers. 4x fewer
// multiplications than the direct sum; the transforms multiply magnitudes (PackedConv2d runs it on
// bounded finite inputs only, see packed_conv.h).
class WinogradF4x3 {
 public:
  // `s`: a dense 3x3, stride 1, dilation 1 problem (throws Error otherwise); folded: its weights
  // OIHW with any affine folded in; bias: O values or null. x, y and the residual lie in
  // `layouts` (nChw8c needs channel counts divisible by 8, as PackedConv2d checks).
  WinogradF4x3(const ConvShape& s, const float* folded, const float* bias, ConvLayouts layouts);

  // The same convolution on `s` (the constructor's C, O and padding; any N, H, W). residual: like
  // y, may be y itself, or null; `act`'s residual field is ignored.
  void run(const ConvShape& s, const float* x, float* y, const float* residual,
           const RowEpilogue<float>& act) const;

  size_t packed_bytes() const;

 private:
  int64_t c_ = 0, o_ = 0;
  ConvLayouts layouts_;
  std::vector<float> bias_;             // O values (zeros without a bias)
  std::vector<PackedLinear> products_;  // 36: transformed weights of tap (i, j) as [O, C]
};

}  // namespace crucible::vision
