// max_pool2d on NHWC buffers: each output pixel folds its window's channel vectors, so the inner
// loop runs over contiguous channels (64 and up in the networks that use it).
#include "crucible/ops/max_pool_nhwc.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "crucible/core/error.h"
#include "reduction/reduction_internal.h"
#include "vision/window_geometry.h"

namespace crucible {

namespace {

// The pool over NHWC rows; kC > 0 fixes the channel count at compile time, so nChw8c's blocks of
// 8 become one vector per window tap (a runtime count of 8 ran the stem pool at half the speed).
template <int64_t kC>
void pool_nhwc(const float* x, float* y, int64_t n, int64_t c_runtime, int64_t h, int64_t w,
               int64_t oh, int64_t ow, const vision::PoolParams& p) {
  const int64_t c = kC > 0 ? kC : c_runtime;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  const int64_t rows = n * oh;
#pragma omp parallel for schedule(static) if (rows * ow * c >= reduction::kParallelGrain && \
                                              rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t img = r / oh, i = r % oh;
    const float* xi = x + img * h * w * c;
    for (int64_t j = 0; j < ow; ++j) {
      float* out = y + ((img * oh + i) * ow + j) * c;
      std::fill(out, out + c, kLowest);
      for (int64_t ki = 0; ki < p.kernel.h; ++ki) {
        const int64_t ih = i * p.stride.h - p.padding.h + ki * p.dilation.h;
        if (ih < 0 || ih >= h) continue;
        for (int64_t kj = 0; kj < p.kernel.w; ++kj) {
          const int64_t iw = j * p.stride.w - p.padding.w + kj * p.dilation.w;
          if (iw < 0 || iw >= w) continue;
          const float* in = xi + (ih * w + iw) * c;
#pragma omp simd
          for (int64_t k = 0; k < c; ++k) out[k] = reduction::nan_max(out[k], in[k]);
        }
      }
    }
  }
}

}  // namespace

void max_pool2d_nhwc(const float* x, const Shape& input_shape, const Attrs& attrs, float* y) {
  using vision::pool_out_size;
  vision::check_pool_input(TensorType{DType::kF32, input_shape});
  if (input_shape.size() != 4) {
    throw Error(fmt::format("max_pool2d_nhwc: input {} is not [N,C,H,W]", shape_str(input_shape)));
  }
  const vision::PoolParams p = vision::pool_params(attrs);
  const int64_t n = input_shape[0], c = input_shape[1], h = input_shape[2], w = input_shape[3];
  const int64_t oh = pool_out_size(h, p.kernel.h, p.stride.h, p.padding.h, p.dilation.h,
                                   p.ceil_mode),
                ow = pool_out_size(w, p.kernel.w, p.stride.w, p.padding.w, p.dilation.w,
                                   p.ceil_mode);
  if (oh < 1 || ow < 1) {
    throw Error(fmt::format("max_pool2d_nhwc: no window fits input {}", shape_str(input_shape)));
  }
  if (c == 8) {
    pool_nhwc<8>(x, y, n, c, h, w, oh, ow, p);
  } else {
    pool_nhwc<0>(x, y, n, c, h, w, oh, ow, p);
  }
}

void max_pool2d_nchw8c(const float* x, const Shape& input_shape, const Attrs& attrs, float* y) {
  if (input_shape.size() != 4 || input_shape[1] % 8 != 0) {
    throw Error(fmt::format("max_pool2d_nchw8c: input {} is not [N,C,H,W] with C a multiple of 8",
                            shape_str(input_shape)));
  }
  max_pool2d_nhwc(x, {input_shape[0] * (input_shape[1] / 8), 8, input_shape[2], input_shape[3]},
                  attrs, y);
}

}  // namespace crucible
