// conv2d in f64, the accuracy-reference path (oneDNN has no f64 convolution): im2col + our blocked
// GEMM per image and group, with the input itself as the GEMM operand for 1x1 convolutions.
// (Depthwise convolutions take the direct loop of conv2d_depthwise.cpp instead.)
#include <algorithm>
#include <cstring>
#include <vector>

#include "crucible/ops/gemm.h"
#include "reduction/reduction_internal.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

using reduction::kParallelGrain;

// cols[(ci * kh + i) * kw + j, oh * ow_n + ow] = x[ci, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (zero
// in the padding) for one image's group of cg channels starting at x.
void im2col(const ConvShape& s, int64_t cg, const double* x, double* cols) {
  const int64_t rows = cg * s.kh * s.kw * s.oh, plane = s.oh * s.ow;
#pragma omp parallel for schedule(static) if (rows * s.ow >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t oh = r % s.oh, k = r / s.oh;
    const int64_t j = k % s.kw, i = k / s.kw % s.kh, ci = k / (s.kw * s.kh);
    double* dst = cols + k * plane + oh * s.ow;
    const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
    if (ih < 0 || ih >= s.h) {
      std::fill(dst, dst + s.ow, 0.0);
      continue;
    }
    const double* xr = x + (ci * s.h + ih) * s.w;
    const int64_t off = j * s.p.dilation.w - s.p.padding.w, st = s.p.stride.w;
    int64_t lo, hi;
    tap_range(s.w, s.ow, st, off, lo, hi);
    std::fill(dst, dst + lo, 0.0);
    for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = xr[ow * st + off];
    std::fill(dst + hi, dst + s.ow, 0.0);
  }
}

}  // namespace

void conv2d_f64(const ConvShape& s, const double* x, const double* w, const double* bias,
                double* y) {
  const int64_t g = s.p.groups, cg = s.c / g, og = s.o / g;
  const int64_t plane = s.oh * s.ow, k = cg * s.kh * s.kw;
  // A 1x1 kernel with unit stride and no padding reads the input as it is: [cg, h*w] = [k, plane].
  const bool direct = s.kh == 1 && s.kw == 1 && s.p.stride == Hw{1, 1} && s.p.padding == Hw{0, 0};
  std::vector<double> cols(direct ? 0 : static_cast<size_t>(k * plane));
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t gi = 0; gi < g; ++gi) {
      const double* xg = x + (n * s.c + gi * cg) * s.h * s.w;
      double* yg = y + (n * s.o + gi * og) * plane;
      double beta = 0.0;
      if (bias != nullptr) {
        for (int64_t oc = 0; oc < og; ++oc) std::fill_n(yg + oc * plane, plane, bias[gi * og + oc]);
        beta = 1.0;
      }
      const double* b = xg;
      if (!direct) {
        im2col(s, cg, xg, cols.data());
        b = cols.data();
      }
      // y_g[og, plane] = w_g[og, k] @ cols[k, plane] (+ bias)
      gemm_f64(false, false, og, plane, k, w + gi * og * k, k, b, plane, yg, plane, beta);
    }
  }
}

}  // namespace crucible::vision
