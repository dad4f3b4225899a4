// max_pool2d over channels-inner f32 activations (NHWC, nChw8c): codegen's chains of packed
// convolutions run their max pools on the layout the convolutions hand over, with the op's rules.
#pragma once

#include "crucible/core/tensor.h"
#include "crucible/ir/attrs.h"

namespace crucible {

// y = max_pool2d(x) with the op's attributes (kernel_size, stride, padding, dilation, ceil_mode)
// and its NaN rule (a NaN in a window is the window's result). `input_shape` is the logical
// [N, C, H, W]; x and y are contiguous NHWC buffers of the input and of the op's output shape.
// Throws Error for a shape or attributes the op rejects.
void max_pool2d_nhwc(const float* x, const Shape& input_shape, const Attrs& attrs, float* y);

// The same on nChw8c buffers ([N][C/8][H][W][8]: an NHWC image of 8 channels per block). Throws
// Error also when C is not a multiple of 8.
void max_pool2d_nchw8c(const float* x, const Shape& input_shape, const Attrs& attrs, float* y);

}  // namespace crucible
