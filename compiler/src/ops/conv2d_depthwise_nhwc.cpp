// Depthwise conv2d on channels-last activations: the inner loop runs over contiguous channels, so
// any kernel size vectorizes without the NCHW loop's border cases, and a chain of convolutions
// around it (MobileNetV2's expand and project) stays NHWC.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "reduction_internal.h"
#include "vision_internal.h"

namespace crucible::vision {

void conv2d_depthwise_nhwc(const ConvShape& s, const float* x, const float* w_taps,
                           const float* bias, float* y, const RowEpilogue<float>& ep) {
  const int64_t c = s.c, rows = s.n * s.oh;
  const int64_t work = rows * s.ow * c * s.kh * s.kw;
#pragma omp parallel if (work >= reduction::kParallelGrain && rows > 1)
  {
    std::vector<float> acc(static_cast<size_t>(c));
    float* a = acc.data();
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t n = row / s.oh, oh = row % s.oh;
      const float* xn = x + n * s.h * s.w * c;
      for (int64_t ow = 0; ow < s.ow; ++ow) {
        if (bias != nullptr) {
          std::copy_n(bias, c, a);
        } else {
          std::fill_n(a, c, 0.0f);
        }
        for (int64_t i = 0; i < s.kh; ++i) {
          const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
          if (ih < 0 || ih >= s.h) continue;
          for (int64_t j = 0; j < s.kw; ++j) {
            const int64_t iw = ow * s.p.stride.w - s.p.padding.w + j * s.p.dilation.w;
            if (iw < 0 || iw >= s.w) continue;
            const float* xp = xn + (ih * s.w + iw) * c;
            const float* wp = w_taps + (i * s.kw + j) * c;
#pragma omp simd
            for (int64_t k = 0; k < c; ++k) a[k] += wp[k] * xp[k];
          }
        }
        // The residual may be y itself: finish_row reads each element before writing it.
        const int64_t at = (row * s.ow + ow) * c;
        finish_row(a, ep.residual != nullptr ? ep.residual + at : nullptr, y + at, c, ep);
      }
    }
  }
}

}  // namespace crucible::vision
