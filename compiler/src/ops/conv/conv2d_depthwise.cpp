// Depthwise conv2d (one input channel per group) as a direct loop over NCHW output rows, in float
// or double (float on narrow planes with one output per input channel goes to the channel-blocked
// loop instead).
// Square 3x3 and 5x5 kernels compute each interior output with all taps unrolled in one vector
// loop; other shapes add one tap at a time. A fused
// epilogue (residual, relu/clamp) runs on each row while it is in L1.
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "reduction/reduction_internal.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

// One output row (plane's output row oh), any kernel: each tap adds a shifted, strided input row
// to the output row, which stays in L1.
template <typename T>
void row_by_taps(const ConvShape& s, const T* xp, const T* wp, T b, int64_t oh, T* yr) {
  std::fill(yr, yr + s.ow, b);
  const int64_t st = s.p.stride.w;
  for (int64_t i = 0; i < s.kh; ++i) {
    const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
    if (ih < 0 || ih >= s.h) continue;
    const T* xr = xp + ih * s.w;
    for (int64_t j = 0; j < s.kw; ++j) {
      const int64_t off = j * s.p.dilation.w - s.p.padding.w;
      const T wv = wp[i * s.kw + j];
      int64_t lo, hi;
      tap_range(s.w, s.ow, st, off, lo, hi);
#pragma omp simd
      for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * st + off];
    }
  }
}

// One output row of a KxK kernel. Rows above or below the input read a zero row, so only the
// columns need bounds: the interior columns, where every tap is inside the input, are one vector
// loop with K*K multiply-adds per output; the few border columns check each tap.
template <typename T, int K>
void row_unrolled(const ConvShape& s, const T* xp, const T* wp, T b, int64_t oh, const T* zeros,
                  T* yr) {
  const int64_t st = s.p.stride.w, dw = s.p.dilation.w, pw = s.p.padding.w;
  const T* rows[K];
  for (int i = 0; i < K; ++i) {
    const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
    rows[i] = ih < 0 || ih >= s.h ? zeros : xp + ih * s.w;
  }
  T w[K * K];
  for (int k = 0; k < K * K; ++k) w[k] = wp[k];
  int64_t lo, hi, lo_last, hi_last;
  tap_range(s.w, s.ow, st, -pw, lo, hi);
  tap_range(s.w, s.ow, st, (K - 1) * dw - pw, lo_last, hi_last);
  lo = std::max(lo, lo_last);
  hi = std::max(lo, std::min(hi, hi_last));
  auto border = [&](int64_t ow) {
    T acc = b;
    for (int i = 0; i < K; ++i) {
      for (int j = 0; j < K; ++j) {
        const int64_t iw = ow * st + j * dw - pw;
        if (iw >= 0 && iw < s.w) acc += w[i * K + j] * rows[i][iw];
      }
    }
    yr[ow] = acc;
  };
  for (int64_t ow = 0; ow < lo; ++ow) border(ow);
  if (st == 1) {  // unit stride: contiguous loads, no gathers
#pragma omp simd
    for (int64_t ow = lo; ow < hi; ++ow) {
      T acc = b;
      for (int i = 0; i < K; ++i) {
        for (int j = 0; j < K; ++j) acc += w[i * K + j] * rows[i][ow + (j * dw - pw)];
      }
      yr[ow] = acc;
    }
  } else {
#pragma omp simd
    for (int64_t ow = lo; ow < hi; ++ow) {
      T acc = b;
      for (int i = 0; i < K; ++i) {
        for (int j = 0; j < K; ++j) acc += w[i * K + j] * rows[i][ow * st + j * dw - pw];
      }
      yr[ow] = acc;
    }
  }
  for (int64_t ow = hi; ow < s.ow; ++ow) border(ow);
}

template <typename T, int K>
void run_rows(const ConvShape& s, const T* x, const T* w, const T* bias, T* y,
              const RowEpilogue<T>& ep) {
  // y[n, oc] = bias[oc] + sum_ij w[oc, 0, i, j] * x[n, oc / m, ...], m = output channels per group.
  const int64_t per_group = s.o / s.p.groups, rows = s.n * s.o * s.oh;
  const int64_t work = rows * s.ow * s.kh * s.kw;
  const std::vector<T> zeros(K > 0 ? s.w : 0, T(0));
  // Each thread takes a contiguous run of output rows and walks it with counters: a row is only
  // ~100 cycles of work, so the divisions of recomputing (plane, oh) per row would show.
#pragma omp parallel if (work >= reduction::kParallelGrain && rows > 1)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    // With a residual the row is computed aside first, since the residual may be y itself.
    std::vector<T> aside(ep.residual != nullptr ? s.ow : 0);
    int64_t plane = begin / s.oh, oh = begin % s.oh;
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = plane / s.o, oc = plane % s.o;
      const T* xp = x + (n * s.c + oc / per_group) * s.h * s.w;
      const T* wp = w + oc * s.kh * s.kw;
      const T b = bias != nullptr ? bias[oc] : T(0);
      T* yr = y + row * s.ow;
      T* acc = ep.residual != nullptr ? aside.data() : yr;
      if constexpr (K > 0) {
        row_unrolled<T, K>(s, xp, wp, b, oh, zeros.data(), acc);
      } else {
        row_by_taps<T>(s, xp, wp, b, oh, acc);
      }
      if (ep.active()) {
        finish_row(acc, ep.residual != nullptr ? ep.residual + row * s.ow : nullptr, yr, s.ow, ep);
      }
      if (++oh == s.oh) {
        oh = 0;
        ++plane;
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_depthwise(const ConvShape& s, const T* x, const T* w, const T* bias, T* y,
                      const RowEpilogue<T>& epilogue) {
  // Sixteen or more float channels, one output per input channel, on planes narrower than 40
  // (EfficientNet's and MobileNet's later stages): vectors along channels rather than along rows
  // of 7 to 28 outputs, which leave most of a 16-lane vector idle or in the border loop. At batch
  // 8, 2 threads: 672 channels 5x5 at 14x14 with silu 6.24 -> 1.23 ms, 480 3x3 at 14x14 1.99 ->
  // 0.63 ms; at 56x56 (144 3x3, relu6) the rows win, 1.82 against 2.55 ms (the block's tiles
  // outgrow L2).
  if constexpr (std::is_same_v<T, float>) {
    if (s.o == s.c && s.c >= 16 && s.ow < 40) {
      conv2d_depthwise_channel_blocks(s, x, w, bias, y, epilogue);
      return;
    }
  }
  if (s.kh == 3 && s.kw == 3) {
    run_rows<T, 3>(s, x, w, bias, y, epilogue);
  } else if (s.kh == 5 && s.kw == 5) {
    run_rows<T, 5>(s, x, w, bias, y, epilogue);
  } else {
    run_rows<T, 0>(s, x, w, bias, y, epilogue);
  }
}

template void conv2d_depthwise<float>(const ConvShape&, const float*, const float*, const float*,
                                      float*, const RowEpilogue<float>&);
template void conv2d_depthwise<double>(const ConvShape&, const double*, const double*,
                                       const double*, double*, const RowEpilogue<double>&);

}  // namespace crucible::vision
