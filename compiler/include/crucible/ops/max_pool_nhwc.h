// max_pool2d over channels-last (NHWC) f32 activations: codegen's chains of packed convolutions
// run their max pools on the layout the convolutions hand over, with max_pool2d's semantics.
#pragma once

#include "crucible/core/tensor.h"
#include "crucible/ir/attrs.h"

namespace crucible {

// y = max_pool2d(x) with the op's attributes (kernel_size, stride, padding, dilation, ceil_mode)
// and its NaN rule (a NaN in a window is the window's result). `input_shape` is the logical
// [N, C, H, W]; x and y are contiguous NHWC buffers of the input and of the op's output shape.
// Throws Error for a shape or attributes the op rejects.
void max_pool2d_nhwc(const float* x, const Shape& input_shape, const Attrs& attrs, float* y);

}  // namespace crucible
