// The row engine of the windowed pools: output row by output row over contiguous NCHW planes,
// folding each window in PyTorch's order (kernel rows outer, kernel columns inner).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "crucible/core/tensor.h"
#include "elementwise/elementwise_loop.h"
#include "reduction/reduction_internal.h"
#include "vision/window_geometry.h"

namespace crucible::vision {

// The input as contiguous planes: [planes, h, w] with planes = N * C (N = 1 for a 3-D input).
struct Planes {
  Tensor x;
  int64_t planes, h, w;
};

// acc[o] = comb(acc[o], x[o * s]) for o in [lo, hi). Strides 1 and 2 (nearly every pool) get
// their own loops: with the stride known at compile time the vectorizer loads whole vectors and
// permutes, where a run-time stride leaves it one element at a time.
template <typename Acc, typename T, typename Comb>
inline void fold_tap(Acc* acc, const T* x, int64_t lo, int64_t hi, int64_t s, const Comb& comb) {
  if (s == 1) {
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) acc[o] = comb(acc[o], static_cast<Acc>(ew::load(x[o])));
  } else if (s == 2) {
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) acc[o] = comb(acc[o], static_cast<Acc>(ew::load(x[2 * o])));
  } else {
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) acc[o] = comb(acc[o], static_cast<Acc>(ew::load(x[o * s])));
  }
}

// One output row of any window: acc starts at init and each kernel tap folds a shifted, strided
// input row into it (rows[i] null for kernel rows outside the input).
template <typename T, typename Acc, typename Comb>
void row_by_taps(const T* const* rows, int64_t kh, int64_t in_w, int64_t out_w, const PoolParams& p,
                 Acc init, const Comb& comb, Acc* acc) {
  std::fill(acc, acc + out_w, init);
  for (int64_t i = 0; i < kh; ++i) {
    if (rows[i] == nullptr) continue;
    for (int64_t j = 0; j < p.kernel.w; ++j) {
      const int64_t off = j * p.dilation.w - p.padding.w;
      int64_t lo, hi;
      tap_range(in_w, out_w, p.stride.w, off, lo, hi);
      fold_tap(acc, rows[i] + off, lo, hi, p.stride.w, comb);
    }
  }
}

// One output row of a KxK window with every tap unrolled into a single vector loop over the
// interior columns (where all taps are inside the input): per-tap loops over rows this short
// (56 outputs in ResNet's stem) spend most of their time in loop set-up and scalar remainders.
// rows[i] is `fill` (the fold's identity, as a row) for kernel rows outside the input; the few
// border columns check each tap.
template <int K, typename T, typename Acc, typename Comb>
void row_unrolled(const T* const* rows, int64_t in_w, int64_t out_w, const PoolParams& p, Acc init,
                  const Comb& comb, Acc* acc) {
  const int64_t s = p.stride.w, dw = p.dilation.w, pw = p.padding.w;
  int64_t lo, hi, lo_last, hi_last;
  tap_range(in_w, out_w, s, -pw, lo, hi);
  tap_range(in_w, out_w, s, (K - 1) * dw - pw, lo_last, hi_last);
  lo = std::max(lo, lo_last);
  hi = std::max(lo, std::min(hi, hi_last));
  auto border = [&](int64_t o) {
    Acc a = init;
    for (int i = 0; i < K; ++i) {
      for (int j = 0; j < K; ++j) {
        const int64_t iw = o * s + j * dw - pw;
        if (iw >= 0 && iw < in_w) a = comb(a, static_cast<Acc>(ew::load(rows[i][iw])));
      }
    }
    acc[o] = a;
  };
  for (int64_t o = 0; o < lo; ++o) border(o);
  auto interior = [&](auto stride) {
#pragma omp simd
    for (int64_t o = lo; o < hi; ++o) {
      Acc a = init;
      for (int i = 0; i < K; ++i) {
        for (int j = 0; j < K; ++j)
          a = comb(a, static_cast<Acc>(ew::load(rows[i][o * stride + (j * dw - pw)])));
      }
      acc[o] = a;
    }
  };
  if (s == 1) {
    interior(std::integral_constant<int64_t, 1>{});
  } else if (s == 2) {
    interior(std::integral_constant<int64_t, 2>{});
  } else {
    interior(s);
  }
  for (int64_t o = hi; o < out_w; ++o) border(o);
}

// Runs a windowed pool row by row: acc[ow] folds every in-bounds element of its window with comb,
// starting from init (comb's identity), and finish(oh, acc, out_row) writes the row. Each thread
// walks a contiguous run of output rows.
template <typename T, typename Acc, typename Comb, typename Finish>
void pool_rows(const Planes& in, T* y, Hw out, const PoolParams& p, Acc init, Comb comb,
               Finish finish) {
  const T* x = in.x.data<T>();
  const int64_t rows = in.planes * out.h, kh = p.kernel.h;
  const int64_t work = rows * out.w * p.kernel.h * p.kernel.w;
  const int square = p.kernel.h == p.kernel.w ? static_cast<int>(p.kernel.h) : 0;
  const bool unrolled = square == 2 || square == 3;
  const std::vector<T> fill(unrolled ? in.w : 0, ew::store<T>(init));
#pragma omp parallel if (work >= reduction::kParallelGrain && rows > 1)
  {
    std::vector<Acc> acc_buf(out.w);
    std::vector<const T*> row_ptrs(kh);
    Acc* acc = acc_buf.data();
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    int64_t plane = begin / out.h, oh = begin % out.h;
    for (int64_t row = begin; row < end; ++row) {
      const T* xp = x + plane * in.h * in.w;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t ih = oh * p.stride.h - p.padding.h + i * p.dilation.h;
        row_ptrs[i] = ih >= 0 && ih < in.h ? xp + ih * in.w : unrolled ? fill.data() : nullptr;
      }
      if (square == 3) {
        row_unrolled<3>(row_ptrs.data(), in.w, out.w, p, init, comb, acc);
      } else if (square == 2) {
        row_unrolled<2>(row_ptrs.data(), in.w, out.w, p, init, comb, acc);
      } else {
        row_by_taps(row_ptrs.data(), kh, in.w, out.w, p, init, comb, acc);
      }
      finish(oh, acc, y + row * out.w);
      if (++oh == out.h) {
        oh = 0;
        ++plane;
      }
    }
  }
}

}  // namespace crucible::vision
