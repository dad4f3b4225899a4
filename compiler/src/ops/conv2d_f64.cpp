// conv2d in f64, the accuracy-reference path (oneDNN has no f64 convolution): im2col + our blocked
// GEMM per image and group, the input itself as the GEMM operand for 1x1 convolutions, and a direct
// loop when each group has one input channel (depthwise), where a GEMM would be a thin sliver.
#include <algorithm>
#include <cstring>
#include <vector>

#include "crucible/ops/gemm.h"
#include "ops/reduction_internal.h"
#include "ops/vision_internal.h"

namespace crucible::vision {
namespace {

using reduction::kParallelGrain;

// Output columns ow whose input column ow * s + off lies in [0, w): [lo, hi).
void valid_range(int64_t w, int64_t out_w, int64_t s, int64_t off, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  const int64_t last = w - 1 - off;  // ow * s <= last
  hi = last < 0 ? 0 : std::min(out_w, last / s + 1);
  lo = std::min(lo, hi);
}

// One input channel per group: y[n, oc] = bias[oc] + sum_ij w[oc, 0, i, j] * x[n, oc / m, ...] with
// m = output channels per group. Row by row: each kernel tap adds a shifted, strided input row.
void depthwise(const ConvShape& s, const double* x, const double* w, const double* bias,
               double* y) {
  const int64_t per_group = s.o / s.p.groups, rows = s.n * s.o * s.oh;
  const int64_t work = rows * s.ow * s.kh * s.kw;
#pragma omp parallel for schedule(static) if (work >= kParallelGrain && rows > 1)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t plane = row / s.oh, oh = row % s.oh;
    const int64_t n = plane / s.o, oc = plane % s.o;
    const double* xp = x + (n * s.c + oc / per_group) * s.h * s.w;
    const double* wp = w + oc * s.kh * s.kw;
    double* yr = y + row * s.ow;
    const double b = bias != nullptr ? bias[oc] : 0.0;
    for (int64_t ow = 0; ow < s.ow; ++ow) yr[ow] = 0.0;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
      if (ih < 0 || ih >= s.h) continue;
      const double* xr = xp + ih * s.w;
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t off = j * s.p.dilation.w - s.p.padding.w, st = s.p.stride.w;
        const double wv = wp[i * s.kw + j];
        int64_t lo, hi;
        valid_range(s.w, s.ow, st, off, lo, hi);
#pragma omp simd
        for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * st + off];
      }
    }
    for (int64_t ow = 0; ow < s.ow; ++ow) yr[ow] += b;
  }
}

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
    valid_range(s.w, s.ow, st, off, lo, hi);
    std::fill(dst, dst + lo, 0.0);
    for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = xr[ow * st + off];
    std::fill(dst + hi, dst + s.ow, 0.0);
  }
}

}  // namespace

void conv2d_f64(const ConvShape& s, const double* x, const double* w, const double* bias,
                double* y) {
  const int64_t g = s.p.groups, cg = s.c / g, og = s.o / g;
  if (cg == 1) {
    depthwise(s, x, w, bias, y);
    return;
  }
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
