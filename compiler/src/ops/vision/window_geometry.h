// Sliding-window geometry shared by conv2d and the 2-D pools: their attributes read and validated
// once, PyTorch's output-size rules, and the operand checks the type rules and kernels agree on.
#pragma once

#include <cstdint>

#include "crucible/ir/attrs.h"
#include "crucible/ir/graph.h"

namespace crucible::vision {

// A (height, width) pair: one per spatial dim of an NCHW tensor.
struct Hw {
  int64_t h = 0, w = 0;
  bool operator==(const Hw&) const = default;
};

struct ConvParams {
  Hw stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

struct PoolParams {
  Hw kernel, stride, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

// Reads an int-list attribute of one or two elements (one means both dims, like PyTorch's int
// arguments); `fallback` when absent. Throws Error naming the attribute for any other length.
Hw pair_attr(const Attrs& attrs, const char* name, Hw fallback);

// conv2d's attributes, validated (stride and dilation positive, padding non-negative, groups
// positive). Throws Error.
ConvParams conv_params(const Attrs& attrs);
// A pool's attributes: kernel_size positive, stride positive (absent or [] means kernel_size),
// padding non-negative and at most half the kernel (PyTorch's rule), dilation positive.
PoolParams pool_params(const Attrs& attrs);

// An output extent computed in 128 bits (attributes come from files), as int64; throws Error when
// it does not fit.
int64_t window_extent(__int128 extent);
// Output extent of a convolution along one dim: floor((in + 2p - d(k-1) - 1) / s) + 1.
int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d);
// PyTorch's pooling_output_shape: like conv_out_size, rounding up under ceil_mode, but the last
// window must start inside the input or its left padding (else it is dropped). May be < 1.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

// The output positions o in [0, out) whose input position o * stride + offset lies in [0, in), as
// [lo, hi): the range a window tap can run over without bounds checks (so its loop vectorizes).
void tap_range(int64_t in, int64_t out, int64_t stride, int64_t offset, int64_t& lo, int64_t& hi);

// Checks that a pool's input is a floating-point [C,H,W] or [N,C,H,W] tensor with non-empty
// C, H and W (N may be 0), as PyTorch's pools require. Throws Error.
void check_pool_input(const TensorType& x);

}  // namespace crucible::vision
