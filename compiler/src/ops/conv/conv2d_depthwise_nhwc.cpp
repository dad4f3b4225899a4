// Depthwise conv2d on channels-last activations: the inner loop runs over contiguous channels, so
// any kernel size vectorizes without the NCHW loop's border cases, and a chain of convolutions
// around it (MobileNetV2's expand and project) stays NHWC. Narrow NCHW planes borrow the same
// loop through a channels-last tile of 16 channels (conv2d_depthwise_channel_blocks), and nChw8c
// runs it per block of 8 channels.

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps) at -Wuninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "reduction/reduction_internal.h"
#include "vision/vision_internal.h"

namespace crucible::vision {

namespace {

// Interior pixels run blocks of kPix output pixels by one vector of channels, the accumulators in
// registers across every tap, each tap's weight vector loaded once per block. The per-pixel loop
// below keeps its accumulator in memory and reloads it on every tap (three loads and a store per
// vector FMA); on MobileNetV2's and EfficientNet's layers the blocks run 2-3x faster (see
// docs/design_decisions.md). Each output still sums bias, then its taps in (i, j) order. Blocks
// of 8 pixels for nChw8c's 8 lanes measured slower on AVX2 (4.5 against 3.8 ms on MobileNetV2's
// 144 channels at 56x56; rows of 14 leave more to the single-pixel loop).
constexpr int kPix = 4;

template <int kLanes>
struct Lanes {
  typedef float V __attribute__((vector_size(kLanes * sizeof(float))));
};

// One row's output pixels [ow_lo, ow_hi), all of whose taps lie inside the input along W, for
// channels [c_lo, c_hi) in vectors of kLanes, into acc (the row's [ow][c] buffer). Taps [i_lo,
// i_hi) are the rows inside the input. Channels run inside each block of pixels, so every tap's
// reads walk its input row's channels in order, as XNNPACK's depthwise does. With channels outside
// (the row swept once per vector of channels, at a stride of C floats), MobileNetV2's 144
// channels at 56x56, batch 8, took 3.4 ms on one Zen 5 core, about 60 cycles an output vector;
// channels inside, 2 threads, alternating: 1.21-1.56 -> 0.92-1.25 ms (96 at 112x112 /2: 2.06-2.58
// -> 1.79-2.21).
template <int kLanes>
void interior_block(const ConvShape& s, const float* xn, const float* w_taps, const float* bias,
                    float* acc, int64_t oh, int64_t i_lo, int64_t i_hi, int64_t ow_lo,
                    int64_t ow_hi, int64_t c_lo, int64_t c_hi) {
  using V = typename Lanes<kLanes>::V;
  const int64_t c = s.c, sw = s.p.stride.w, dw = s.p.dilation.w;
  auto load = [](const float* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  };
  auto bias_at = [&](int64_t c0) {
    V b{};
    if (bias != nullptr) std::memcpy(&b, bias + c0, sizeof(V));
    return b;
  };
  int64_t ow = ow_lo;
  for (; ow + kPix <= ow_hi; ow += kPix) {
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += kLanes) {
      V a[kPix];
      const V b = bias_at(c0);
      for (int p = 0; p < kPix; ++p) a[p] = b;
      for (int64_t i = i_lo; i < i_hi; ++i) {
        const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
        const float* xr = xn + ih * s.w * c + c0;
        for (int64_t j = 0; j < s.kw; ++j) {
          const V w = load(w_taps + (i * s.kw + j) * c + c0);
          const float* xp = xr + (ow * sw - s.p.padding.w + j * dw) * c;
          for (int p = 0; p < kPix; ++p) a[p] += w * load(xp + p * sw * c);
        }
      }
      for (int p = 0; p < kPix; ++p) std::memcpy(acc + (ow + p) * c + c0, &a[p], sizeof(V));
    }
  }
  for (; ow < ow_hi; ++ow) {
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += kLanes) {
      V a = bias_at(c0);
      for (int64_t i = i_lo; i < i_hi; ++i) {
        const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h;
        const float* xr = xn + ih * s.w * c + c0;
        for (int64_t j = 0; j < s.kw; ++j) {
          a += load(w_taps + (i * s.kw + j) * c + c0) *
               load(xr + (ow * sw - s.p.padding.w + j * dw) * c);
        }
      }
      std::memcpy(acc + ow * c + c0, &a, sizeof(V));
    }
  }
}

// interior_block<16> for a 3x3 kernel of stride S along W and dilation 1: with the kernel's size
// known, each input vector a block of kPix3 outputs reads is loaded once for every output whose
// window holds it ((P-1)*S + 3 loads a tap row instead of 3P), and a tap row outside the input
// is skipped as a whole. Batch 8, 2 threads, medians of 5 alternating runs on a Zen 5 VM: 144
// channels at 56x56 1.33 -> 0.85 ms, 96 at 112x112 /2 2.12 -> 1.34, 384 at 14x14 0.154 -> 0.123;
// blocks of 8 pixels were 5-10% slower than 6. The unroll pragmas matter: without them GCC 12
// kept the accumulators in memory and stride 2 ran twice as slow as the generic loop.
constexpr int kPix3 = 6;

template <int S>
void interior_block_3x3(const ConvShape& s, const float* xn, const float* w_taps, const float* bias,
                        float* acc, int64_t oh, int64_t i_lo, int64_t i_hi, int64_t ow_lo,
                        int64_t ow_hi, int64_t c_lo, int64_t c_hi) {
  using V = typename Lanes<16>::V;
  const int64_t c = s.c;
  auto load = [](const float* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  };
  const float* rows[3];
  for (int i = 0; i < 3; ++i) {
    const int64_t ih = oh * s.p.stride.h - s.p.padding.h + i;
    rows[i] = i >= i_lo && i < i_hi ? xn + ih * s.w * c : nullptr;
  }
  auto block = [&]<int P>(int64_t ow, int64_t c0) {
    V a[P];
    V b{};
    if (bias != nullptr) b = load(bias + c0);
    for (int p = 0; p < P; ++p) a[p] = b;
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
      if (rows[i] == nullptr) continue;
      const V w0 = load(w_taps + (i * 3) * c + c0), w1 = load(w_taps + (i * 3 + 1) * c + c0),
              w2 = load(w_taps + (i * 3 + 2) * c + c0);
      const float* xr = rows[i] + (ow * S - s.p.padding.w) * c + c0;
#pragma GCC unroll 16
      for (int q = 0; q < (P - 1) * S + 3; ++q) {
        const V x = load(xr + q * c);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const int j = q - p * S;
          if (j == 0) a[p] += w0 * x;
          if (j == 1) a[p] += w1 * x;
          if (j == 2) a[p] += w2 * x;
        }
      }
    }
    for (int p = 0; p < P; ++p) std::memcpy(acc + (ow + p) * c + c0, &a[p], sizeof(V));
  };
  int64_t ow = ow_lo;
  for (; ow + kPix3 <= ow_hi; ow += kPix3)
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += 16) block.template operator()<kPix3>(ow, c0);
  for (; ow < ow_hi; ++ow)
    for (int64_t c0 = c_lo; c0 < c_hi; c0 += 16) block.template operator()<1>(ow, c0);
}

// Any pixel, channels [c0, c): the accumulator in memory, taps outside the input skipped.
void any_pixel(const ConvShape& s, const float* xn, const float* w_taps, const float* bias,
               float* a, int64_t oh, int64_t ow, int64_t c0) {
  const int64_t c = s.c;
  if (bias != nullptr) {
    std::copy(bias + c0, bias + c, a + c0);
  } else {
    std::fill(a + c0, a + c, 0.0f);
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
      for (int64_t k = c0; k < c; ++k) a[k] += wp[k] * xp[k];
    }
  }
}

// The output columns every tap along W finds inside the input: [lo, hi).
void interior_columns(const ConvShape& s, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = s.ow;
  for (int64_t j = 0; j < s.kw; ++j) {
    int64_t a = 0, b = 0;
    tap_range(s.w, s.ow, s.p.stride.w, j * s.p.dilation.w - s.p.padding.w, a, b);
    lo = std::max(lo, a);
    hi = std::min(hi, b);
  }
  if (hi < lo) hi = lo;
}

// Output row oh of one image (xn: its [H][W][C] input) into acc ([OW][C]), before the epilogue.
void nhwc_row(const ConvShape& s, const float* xn, const float* w_taps, const float* bias,
              float* acc, int64_t oh, int64_t ow_lo, int64_t ow_hi) {
  const int64_t c = s.c, c16 = c / 16 * 16, c8 = c / 8 * 8;
  int64_t i_lo = 0, i_hi = 0;  // the taps along H inside the input
  auto ih = [&](int64_t i) { return oh * s.p.stride.h - s.p.padding.h + i * s.p.dilation.h; };
  while (i_lo < s.kh && ih(i_lo) < 0) ++i_lo;
  for (i_hi = i_lo; i_hi < s.kh && ih(i_hi) < s.h;) ++i_hi;
  // A 3x3 sweeps all its channels inside each block of pixels; larger kernels one vector of
  // channels across the row, whose weights are reused along it: on a 5x5 on 480 channels at
  // 14x14 that measured 0.42-0.44 ms against 0.47-0.51 with channels inside.
  const int64_t chunk = s.kh * s.kw <= 9 ? std::max<int64_t>(c16, 16) : 16;
  const bool k3 = s.kh == 3 && s.kw == 3 && s.p.dilation.h == 1 && s.p.dilation.w == 1 &&
                  (s.p.stride.w == 1 || s.p.stride.w == 2);
  for (int64_t c0 = 0; c0 < c16; c0 += chunk) {
    const int64_t c1 = std::min(c16, c0 + chunk);
    if (k3 && s.p.stride.w == 1) {
      interior_block_3x3<1>(s, xn, w_taps, bias, acc, oh, i_lo, i_hi, ow_lo, ow_hi, c0, c1);
    } else if (k3) {
      interior_block_3x3<2>(s, xn, w_taps, bias, acc, oh, i_lo, i_hi, ow_lo, ow_hi, c0, c1);
    } else {
      interior_block<16>(s, xn, w_taps, bias, acc, oh, i_lo, i_hi, ow_lo, ow_hi, c0, c1);
    }
  }
  if (c8 > c16) interior_block<8>(s, xn, w_taps, bias, acc, oh, i_lo, i_hi, ow_lo, ow_hi, c16, c8);
  for (int64_t ow = 0; ow < s.ow; ++ow) {
    const bool interior = ow >= ow_lo && ow < ow_hi;
    if (!interior || c8 < c)
      any_pixel(s, xn, w_taps, bias, acc + ow * c, oh, ow, interior ? c8 : 0);
  }
}

// Where output row `at` (an offset into y) is summed: y itself, or `scratch` when a residual,
// which may be y itself, is added after.
float* row_accumulator(const RowEpilogue<float>& ep, std::vector<float>& scratch, float* y,
                       int64_t at) {
  return ep.residual != nullptr ? scratch.data() : y + at;
}

// The epilogue from acc into y's row at offset `at`, when there is anything to do.
void finish_output_row(const float* acc, float* y, int64_t at, int64_t row_len,
                       const RowEpilogue<float>& ep) {
  if (ep.active() || acc != y + at) {
    finish_row(acc, ep.residual != nullptr ? ep.residual + at : nullptr, y + at, row_len, ep);
  }
}

// The padding-free problem of one image's block of `lanes` channels laid in a tile with s's
// padding as zeros: every output of it is an interior one.
ConvShape padded_block_problem(const ConvShape& s, int64_t lanes) {
  ConvShape b = s;
  b.n = 1;
  b.c = b.o = lanes;
  b.h = (s.oh - 1) * s.p.stride.h + (s.kh - 1) * s.p.dilation.h + 1;
  b.w = (s.ow - 1) * s.p.stride.w + (s.kw - 1) * s.p.dilation.w + 1;
  b.p.padding = {0, 0};
  return b;
}

// Output rows [0, rows) of row_len floats each, in parallel: row(r, acc) sums row r into acc, then
// the epilogue finishes it into y's row r.
template <typename RowFn>
void each_output_row(int64_t rows, int64_t row_len, int64_t taps, float* y,
                     const RowEpilogue<float>& ep, RowFn row_fn) {
#pragma omp parallel if (rows * row_len * taps >= reduction::kParallelGrain && rows > 1)
  {
    // The residual may be y itself, so with one the row is summed aside and finished into y.
    std::vector<float> scratch(ep.residual != nullptr ? static_cast<size_t>(row_len) : 0);
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      float* acc = row_accumulator(ep, scratch, y, row * row_len);
      row_fn(row, acc);
      finish_output_row(acc, y, row * row_len, row_len, ep);
    }
  }
}

constexpr int64_t kBlock = 16;

// dst[col * dst_stride + row] = src[row * src_stride + col] for a 16x16 block.
void transpose16(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
#if defined(__AVX512F__)
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  // Within 128-bit lanes: pairs of rows interleaved, then pairs of pairs, so lane L of t[4g + j]
  // holds column 4L + j of rows 4g..4g+3; then the lanes are gathered across the four groups.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {
    const __m512d a0 = _mm512_castps_pd(t[4 * g]), a1 = _mm512_castps_pd(t[4 * g + 1]),
                  a2 = _mm512_castps_pd(t[4 * g + 2]), a3 = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 c = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 d = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    const __m512 e = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 f = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    _mm512_storeu_ps(dst + j * dst_stride, _mm512_shuffle_f32x4(c, e, 0x88));
    _mm512_storeu_ps(dst + (4 + j) * dst_stride, _mm512_shuffle_f32x4(d, f, 0x88));
    _mm512_storeu_ps(dst + (8 + j) * dst_stride, _mm512_shuffle_f32x4(c, e, 0xdd));
    _mm512_storeu_ps(dst + (12 + j) * dst_stride, _mm512_shuffle_f32x4(d, f, 0xdd));
  }
#else
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) dst[j * dst_stride + i] = src[i * src_stride + j];
  }
#endif
}

// One image's channels [c0, c0 + width) of NCHW x into tile[TH][TW][16], zero-padded as the
// block problem `b` (padding 0) reads it: tile row r is input row r - ph, column q input column
// q - pw; lanes past width are zero.
void to_padded_tile(const ConvShape& s, const ConvShape& b, const float* x, int64_t width,
                    float* tile) {
  const int64_t plane = s.h * s.w, ph = s.p.padding.h, pw = s.p.padding.w;
  const int64_t cols = std::min(s.w, b.w - pw);  // input columns the windows reach
  std::fill(tile, tile + b.h * b.w * kBlock, 0.0f);
  for (int64_t r = 0; r < b.h; ++r) {
    const int64_t ih = r - ph;
    if (ih < 0 || ih >= s.h) continue;
    float* dst = tile + (r * b.w + pw) * kBlock;
    const float* src = x + ih * s.w;
    int64_t q = 0;
    if (width == kBlock) {
      for (; q + 16 <= cols; q += 16) transpose16(src + q, plane, dst + q * kBlock, kBlock);
    }
    for (; q < cols; ++q) {
      for (int64_t k = 0; k < width; ++k) dst[q * kBlock + k] = src[k * plane + q];
    }
  }
}

// out[p][16] into `width` planes[k][p] of out_plane floats.
void to_planes(const float* out, int64_t out_plane, int64_t width, float* planes) {
  int64_t p = 0;
  if (width == kBlock) {
    for (; p + 16 <= out_plane; p += 16)
      transpose16(out + p * kBlock, kBlock, planes + p, out_plane);
  }
  for (; p < out_plane; ++p) {
    for (int64_t k = 0; k < width; ++k) planes[k * out_plane + p] = out[p * kBlock + k];
  }
}

}  // namespace

void conv2d_depthwise_nhwc(const ConvShape& s, const float* x, const float* w_taps,
                           const float* bias, float* y, const RowEpilogue<float>& ep) {
  const int64_t c = s.c;
  int64_t ow_lo = 0, ow_hi = 0;
  interior_columns(s, ow_lo, ow_hi);
  each_output_row(s.n * s.oh, s.ow * c, s.kh * s.kw, y, ep, [&](int64_t row, float* acc) {
    const int64_t n = row / s.oh, oh = row % s.oh;
    nhwc_row(s, x + n * s.h * s.w * c, w_taps, bias, acc, oh, ow_lo, ow_hi);
  });
}

namespace {
// One block image ([H][W][8]) into tile[TH][TW][8] with its padding as zeros, as the padding-free
// problem `b` reads it.
void to_padded_block(const ConvShape& s, const ConvShape& b, const float* x, float* tile) {
  constexpr int64_t kLanes = 8;
  const int64_t ph = s.p.padding.h, pw = s.p.padding.w;
  const int64_t cols = std::max<int64_t>(0, std::min(s.w, b.w - pw));  // columns windows reach
  for (int64_t r = 0; r < b.h; ++r) {
    float* dst = tile + r * b.w * kLanes;
    const int64_t ih = r - ph;
    if (ih < 0 || ih >= s.h) {
      std::fill(dst, dst + b.w * kLanes, 0.0f);
      continue;
    }
    std::fill(dst, dst + pw * kLanes, 0.0f);
    std::memcpy(dst + pw * kLanes, x + ih * s.w * kLanes, cols * kLanes * sizeof(float));
    std::fill(dst + (pw + cols) * kLanes, dst + b.w * kLanes, 0.0f);
  }
}

// nChw8c on planes narrower than kTiledBelowWidth: each block image is copied into a tile with its
// padding as zeros, so no output takes any_pixel's per-tap checks (on 14-wide planes a 3x3's
// border outputs are 2 of 14, a 5x5's 4). On an AVX2 EPYC, bn + ReLU6, batch 8: 384 channels at
// 14x14 0.78-0.82 -> 0.57-0.63 ms, a 5x5 on 480 at 14x14 2.38-2.55 -> 1.39-1.69; on 56- and
// 112-wide planes the copy gained nothing measurable (3.2-4.1 against 3.6-3.8 ms).
constexpr int64_t kTiledBelowWidth = 40;

void conv2d_depthwise_nchw8c_tiled(const ConvShape& s, const float* x, const float* w_blocks,
                                   const float* bias, float* y, const RowEpilogue<float>& ep) {
  constexpr int64_t kLanes = 8;
  const int64_t blocks = s.c / kLanes, taps = s.kh * s.kw;
  const ConvShape b = padded_block_problem(s, kLanes);
  const int64_t row_len = s.ow * kLanes, work = s.n * s.c * s.oh * s.ow * taps;
#pragma omp parallel if (work >= reduction::kParallelGrain && s.n * blocks > 1)
  {
    std::vector<float> tile(static_cast<size_t>(b.h * b.w * kLanes));
    std::vector<float> scratch(ep.residual != nullptr ? static_cast<size_t>(row_len) : 0);
#pragma omp for schedule(static)
    for (int64_t image = 0; image < s.n * blocks; ++image) {
      const int64_t block = image % blocks;
      to_padded_block(s, b, x + image * s.h * s.w * kLanes, tile.data());
      const float* wb = w_blocks + block * taps * kLanes;
      const float* bb = bias != nullptr ? bias + block * kLanes : nullptr;
      for (int64_t oh = 0; oh < s.oh; ++oh) {
        const int64_t at = (image * s.oh + oh) * row_len;
        float* acc = row_accumulator(ep, scratch, y, at);
        interior_block<kLanes>(b, tile.data(), wb, bb, acc, oh, 0, s.kh, 0, s.ow, 0, kLanes);
        finish_output_row(acc, y, at, row_len, ep);
      }
    }
  }
}
}  // namespace

void conv2d_depthwise_nchw8c(const ConvShape& s, const float* x, const float* w_blocks,
                             const float* bias, float* y, const RowEpilogue<float>& ep) {
  if (s.ow < kTiledBelowWidth) {
    conv2d_depthwise_nchw8c_tiled(s, x, w_blocks, bias, y, ep);
    return;
  }
  constexpr int64_t kLanes = 8;
  ConvShape b = s;  // one block of channels: an NHWC image of 8
  b.c = b.o = kLanes;
  const int64_t blocks = s.c / kLanes, taps = s.kh * s.kw;
  int64_t ow_lo = 0, ow_hi = 0;
  interior_columns(b, ow_lo, ow_hi);
  each_output_row(s.n * blocks * s.oh, s.ow * kLanes, taps, y, ep, [&](int64_t row, float* acc) {
    const int64_t image = row / s.oh, oh = row % s.oh, block = image % blocks;
    nhwc_row(b, x + image * s.h * s.w * kLanes, w_blocks + block * taps * kLanes,
             bias != nullptr ? bias + block * kLanes : nullptr, acc, oh, ow_lo, ow_hi);
  });
}

void conv2d_depthwise_channel_blocks(const ConvShape& s, const float* x, const float* w,
                                     const float* bias, float* y, const RowEpilogue<float>& ep) {
  const int64_t blocks = (s.c + kBlock - 1) / kBlock, taps = s.kh * s.kw;
  const int64_t plane = s.h * s.w, out_plane = s.oh * s.ow;
  // The block's problem: one image of 16 channels lying [TH][TW][16] with its padding as zeros, so
  // every output is an interior one (the padding is multiplied, as the NCHW loop does its rows).
  const ConvShape b = padded_block_problem(s, kBlock);
  const int64_t work = s.n * s.c * out_plane * taps;
#pragma omp parallel if (work >= reduction::kParallelGrain && s.n * blocks > 1)
  {
    std::vector<float> tile(static_cast<size_t>(b.h * b.w * kBlock)), wt(taps * kBlock), bt(kBlock),
        out(static_cast<size_t>(out_plane * kBlock)),
        planes(static_cast<size_t>(out_plane * kBlock));
#pragma omp for schedule(static)
    for (int64_t job = 0; job < s.n * blocks; ++job) {
      const int64_t n = job / blocks, c0 = job % blocks * kBlock;
      const int64_t width = std::min(kBlock, s.c - c0);
      // Channels past the last lie as zeros with zero weights; their results are dropped.
      to_padded_tile(s, b, x + (n * s.c + c0) * plane, width, tile.data());
      for (int64_t k = 0; k < kBlock; ++k) {
        for (int64_t t = 0; t < taps; ++t)
          wt[t * kBlock + k] = k < width ? w[(c0 + k) * taps + t] : 0;
        bt[k] = k < width && bias != nullptr ? bias[c0 + k] : 0.0f;
      }
      for (int64_t oh = 0; oh < s.oh; ++oh) {
        interior_block<16>(b, tile.data(), wt.data(), bt.data(), out.data() + oh * s.ow * kBlock,
                           oh, 0, s.kh, 0, s.ow, 0, kBlock);
      }
      to_planes(out.data(), out_plane, width, planes.data());
      // The residual may be y itself: finish_row reads each element before writing it.
      for (int64_t k = 0; k < width; ++k) {
        const int64_t at = (n * s.c + c0 + k) * out_plane;
        finish_row(planes.data() + k * out_plane,
                   ep.residual != nullptr ? ep.residual + at : nullptr, y + at, out_plane, ep);
      }
    }
  }
}

}  // namespace crucible::vision
