// max_pool2d on NHWC buffers: each output pixel folds its window's channel vectors, so the inner
// loop runs over contiguous channels (64 and up in the networks that use it).
#include "crucible/ops/max_pool_nhwc.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "crucible/core/error.h"
#include "reduction_internal.h"
#include "window_geometry.h"

namespace crucible {

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

}  // namespace crucible
