// Sliding-window attributes and output sizes of conv2d and the 2-D pools, following PyTorch's
// rules (including ceil_mode's dropped last window).
#include "vision/window_geometry.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "crucible/core/error.h"

namespace crucible::vision {
namespace {

// Floor division that rounds toward negative infinity, as PyTorch's div_rtn does: a kernel larger
// than the padded input gives a negative numerator, and the output size must then come out < 1.
__int128 floor_div(__int128 a, __int128 b) {
  const __int128 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::string pair_str(Hw v) { return fmt::format("[{},{}]", v.h, v.w); }

void require_positive(Hw v, const char* name) {
  if (v.h < 1 || v.w < 1)
    throw Error(fmt::format("{} must be positive, got {}", name, pair_str(v)));
}

void require_non_negative(Hw v, const char* name) {
  if (v.h < 0 || v.w < 0)
    throw Error(fmt::format("{} must be non-negative, got {}", name, pair_str(v)));
}

}  // namespace

Hw pair_attr(const Attrs& attrs, const char* name, Hw fallback) {
  const AttrValue* v = attrs.find(name);
  if (v == nullptr) return fallback;
  if (const int64_t* i = std::get_if<int64_t>(v)) return {*i, *i};
  const std::vector<int64_t>& list = attrs.get_ints(name);
  if (list.size() == 1) return {list[0], list[0]};
  if (list.size() == 2) return {list[0], list[1]};
  throw Error(
      fmt::format("{} must have 1 or 2 elements (height, width), got {}", name, shape_str(list)));
}

ConvParams conv_params(const Attrs& attrs) {
  ConvParams p;
  p.stride = pair_attr(attrs, "stride", p.stride);
  p.padding = pair_attr(attrs, "padding", p.padding);
  p.dilation = pair_attr(attrs, "dilation", p.dilation);
  p.groups = attrs.get_int_or("groups", 1);
  require_positive(p.stride, "stride");
  require_non_negative(p.padding, "padding");
  require_positive(p.dilation, "dilation");
  if (p.groups < 1) throw Error(fmt::format("groups must be positive, got {}", p.groups));
  return p;
}

PoolParams pool_params(const Attrs& attrs) {
  PoolParams p;
  p.kernel = pair_attr(attrs, "kernel_size", {0, 0});
  require_positive(p.kernel, "kernel_size");
  // PyTorch's stride=None arrives as an empty list: both mean "the kernel size".
  const AttrValue* s = attrs.find("stride");
  const auto* list = s != nullptr ? std::get_if<std::vector<int64_t>>(s) : nullptr;
  p.stride = list != nullptr && list->empty() ? p.kernel : pair_attr(attrs, "stride", p.kernel);
  p.padding = pair_attr(attrs, "padding", p.padding);
  p.dilation = pair_attr(attrs, "dilation", p.dilation);
  p.ceil_mode = attrs.get_bool_or("ceil_mode", false);
  p.count_include_pad = attrs.get_bool_or("count_include_pad", true);
  require_positive(p.stride, "stride");
  require_non_negative(p.padding, "padding");
  require_positive(p.dilation, "dilation");
  // Beyond half a kernel a window could lie wholly in the padding, with nothing to pool.
  if (p.padding.h > p.kernel.h / 2 || p.padding.w > p.kernel.w / 2) {
    throw Error(fmt::format("padding {} must be at most half the kernel size {}",
                            pair_str(p.padding), pair_str(p.kernel)));
  }
  return p;
}

int64_t window_extent(__int128 extent) {
  if (extent > std::numeric_limits<int64_t>::max() || extent < std::numeric_limits<int64_t>::min())
    throw Error("the output size overflows int64 (stride, padding, dilation or kernel too large)");
  return static_cast<int64_t>(extent);
}

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  const __int128 span = __int128{in} + 2 * __int128{p} - __int128{d} * (k - 1) - 1;
  return window_extent(floor_div(span, s) + 1);
}

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const __int128 span =
      __int128{in} + 2 * __int128{p} - __int128{d} * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  __int128 out = floor_div(span, s) + 1;
  // A window that would start in the right padding (or beyond) has no input element: dropped.
  if (ceil_mode && (out - 1) * s >= __int128{in} + p) --out;
  return window_extent(out);
}

void tap_range(int64_t in, int64_t out, int64_t stride, int64_t offset, int64_t& lo, int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = in - 1 - offset;  // o * stride <= last
  hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  lo = std::min(lo, hi);
}

void check_pool_input(const TensorType& x) {
  if (!is_floating(x.dtype)) {
    throw Error(
        fmt::format("input must be floating-point (bf16, f32, f64), got {}", dtype_name(x.dtype)));
  }
  const size_t rank = x.shape.size();
  if (rank != 3 && rank != 4) {
    throw Error(fmt::format("input must be 3-D [C,H,W] or 4-D [N,C,H,W], got {}-D {}", rank,
                            shape_str(x.shape)));
  }
  for (size_t d = rank - 3; d < rank; ++d) {
    if (x.shape[d] == 0) {
      throw Error(
          fmt::format("input {} has an empty channel or spatial dim (only the batch may be 0)",
                      shape_str(x.shape)));
    }
  }
}

}  // namespace crucible::vision
