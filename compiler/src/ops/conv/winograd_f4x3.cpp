// WinogradF4x3: input and output transforms on vectors of 8 channels over chunks of tiles, with
// the 36 transform-domain products as packed GEMMs between them.
#include "conv/winograd_f4x3.h"

#include <fmt/format.h>

#include <algorithm>

#include "crucible/core/error.h"
#include "crucible/core/tensor.h"

// Shapes of the work (measured on an AMD EPYC with AVX2 and no AVX-512, 2 threads, batch 8; the
// figures are in docs/design_decisions.md):
// - Channels go 8 to a vector in both transforms, whatever the layout: nChw8c and NHWC hold them
//   contiguous; NCHW gathers them at a stride of H*W.
// - Tiles go in chunks whose transformed input and output (36 x tiles x (C + O) floats) take
//   about kChunkBytes, so both stay in the last-level cache between the transforms and the GEMMs;
//   large channel counts get fewer tiles per chunk, where the GEMM's weights dominate anyway.
// - The 36 GEMMs of a chunk run one per thread (each serial), so no GEMM splits its small M.

namespace crucible::vision {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kChunkBytes = int64_t{8} << 20;
constexpr int kTaps = 36;  // 6x6 transform-domain points

// Where lane 0 of channel block cb at pixel (n, h, w) lies, and the step between lanes.
struct Strides {
  int64_t n, cb, h, w, lane;
};

Strides strides_of(ActivationLayout layout, int64_t c, int64_t h, int64_t w) {
  switch (layout) {
    case ActivationLayout::kNhwc:
      return {h * w * c, kLanes, w * c, c, 1};
    case ActivationLayout::kNchw8c:
      return {c * h * w, kLanes * h * w, w * kLanes, kLanes, 1};
    case ActivationLayout::kNchw:
      break;
  }
  return {c * h * w, kLanes * h * w, w, 1, h * w};
}

using Vec = float[kLanes];

// Lavin and Gray's F(4x4, 3x3) on the points 0, 1, -1, 2, -2 and infinity: B^T d for 6 inputs.
inline void input_1d(const Vec* d, int64_t step, Vec* out, int64_t out_step) {
  for (int l = 0; l < kLanes; ++l) {
    const float d0 = d[0][l], d1 = d[step][l], d2 = d[2 * step][l], d3 = d[3 * step][l],
                d4 = d[4 * step][l], d5 = d[5 * step][l];
    out[0][l] = 4.0f * d0 - 5.0f * d2 + d4;
    out[out_step][l] = -4.0f * (d1 + d2) + d3 + d4;
    out[2 * out_step][l] = 4.0f * (d1 - d2) - d3 + d4;
    out[3 * out_step][l] = 2.0f * (d3 - d1) - d2 + d4;
    out[4 * out_step][l] = 2.0f * (d1 - d3) - d2 + d4;
    out[5 * out_step][l] = 4.0f * d1 - 5.0f * d3 + d5;
  }
}

// A^T m for 6 transform-domain values: 4 outputs.
inline void output_1d(const Vec* m, int64_t step, Vec* out, int64_t out_step) {
  for (int l = 0; l < kLanes; ++l) {
    const float m0 = m[0][l], m1 = m[step][l], m2 = m[2 * step][l], m3 = m[3 * step][l],
                m4 = m[4 * step][l], m5 = m[5 * step][l];
    const float a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
    out[0][l] = m0 + a + c;
    out[out_step][l] = b + 2.0f * e;
    out[2 * out_step][l] = a + 4.0f * c;
    out[3 * out_step][l] = b + 8.0f * e + m5;
  }
}

// One 6x6 input tile of one channel block (`lanes` valid channels) at top-left (y0, x0), which
// may lie in the padding, to the 36 rows of V it feeds (tap stride `v_step`). kContiguous: the
// lanes are adjacent floats; kFull: all 8 are valid (fixed-length loops the compiler vectorizes;
// a runtime lane count made both transforms 2-3x slower).
template <bool kContiguous, bool kFull>
void input_tile(const float* x, const Strides& xs, int64_t h, int64_t w, int64_t y0, int64_t x0,
                int lanes, float* v, int64_t v_step) {
  if (kFull) lanes = kLanes;
  Vec d[36], t[36];
  for (int i = 0; i < 6; ++i) {
    const int64_t ih = y0 + i;
    for (int j = 0; j < 6; ++j) {
      const int64_t iw = x0 + j;
      Vec& dst = d[i * 6 + j];
      if (ih < 0 || ih >= h || iw < 0 || iw >= w) {
        std::fill_n(dst, kLanes, 0.0f);
        continue;
      }
      const float* p = x + ih * xs.h + iw * xs.w;
      const int64_t step = kContiguous ? 1 : xs.lane;
      if (kFull) {
        for (int l = 0; l < kLanes; ++l) dst[l] = p[l * step];
      } else {
        for (int l = 0; l < kLanes; ++l) dst[l] = l < lanes ? p[l * step] : 0.0f;
      }
    }
  }
  for (int j = 0; j < 6; ++j) input_1d(d + j, 6, t + j, 6);          // columns: B^T d
  for (int i = 0; i < 6; ++i) input_1d(t + i * 6, 1, d + i * 6, 1);  // rows: (B^T d) B
  for (int e = 0; e < kTaps; ++e) {
    if (kFull) {
      std::copy_n(d[e], kLanes, v + e * v_step);
    } else {
      std::copy_n(d[e], lanes, v + e * v_step);
    }
  }
}

// One 4x4 output tile of one block of output channels from the 36 rows of M (tap stride
// `m_step`): bias, residual and activation applied, the pixels past the output's edge dropped.
template <bool kContiguous, bool kFull>
void output_tile(const float* m, int64_t m_step, int lanes, const float* bias, const Strides& ys,
                 int64_t oh, int64_t ow, int64_t y0, int64_t x0, float* y, const float* residual,
                 const RowEpilogue<float>& act) {
  if (kFull) lanes = kLanes;
  Vec in[36], u[24], out[16];
  for (int e = 0; e < kTaps; ++e) {
    if (kFull) {
      for (int l = 0; l < kLanes; ++l) in[e][l] = m[e * m_step + l];
    } else {
      for (int l = 0; l < kLanes; ++l) in[e][l] = l < lanes ? m[e * m_step + l] : 0.0f;
    }
  }
  for (int j = 0; j < 6; ++j) output_1d(in + j, 6, u + j, 6);           // columns: A^T m
  for (int i = 0; i < 4; ++i) output_1d(u + i * 6, 1, out + i * 4, 1);  // rows: (A^T m) A
  for (int i = 0; i < 4 && y0 + i < oh; ++i) {
    for (int j = 0; j < 4 && x0 + j < ow; ++j) {
      const int64_t at = (y0 + i) * ys.h + (x0 + j) * ys.w;
      Vec v, r;
      for (int l = 0; l < kLanes; ++l) v[l] = out[i * 4 + j][l] + bias[l];
      if (kContiguous) {
        finish_row(v, residual != nullptr ? residual + at : nullptr, y + at, kFull ? kLanes : lanes,
                   act);
        continue;
      }
      if (residual != nullptr) {
        for (int l = 0; l < lanes; ++l) r[l] = residual[at + l * ys.lane];
      }
      finish_row(v, residual != nullptr ? r : nullptr, v, lanes, act);
      for (int l = 0; l < lanes; ++l) y[at + l * ys.lane] = v[l];
    }
  }
}

// G g G^T for one 3x3 filter g, in double: the 6x6 transformed filter.
void filter_transform(const float* g, double out[36]) {
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
  double gg[6][3];
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 3; ++k) {
      gg[i][k] = kG[i][0] * g[k] + kG[i][1] * g[3 + k] + kG[i][2] * g[6 + k];
    }
  }
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      out[i * 6 + j] = gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
    }
  }
}

int64_t chunk_tiles(int64_t c, int64_t o, int64_t tiles) {
  const int64_t per_tile = kTaps * (c + o) * static_cast<int64_t>(sizeof(float));
  return std::clamp<int64_t>(kChunkBytes / per_tile, 1, std::max<int64_t>(tiles, 1));
}

int64_t tiles_of(const ConvShape& s) { return s.n * ((s.oh + 3) / 4) * ((s.ow + 3) / 4); }

}  // namespace

WinogradF4x3::WinogradF4x3(const ConvShape& s, const float* folded, const float* bias,
                           ConvLayouts layouts)
    : c_(s.c), o_(s.o), layouts_(layouts), bias_(s.o, 0.0f) {
  if (s.kh != 3 || s.kw != 3 || s.p.stride.h != 1 || s.p.stride.w != 1 || s.p.dilation.h != 1 ||
      s.p.dilation.w != 1 || s.p.groups != 1) {
    throw Error("WinogradF4x3: needs a dense 3x3 convolution with stride 1 and dilation 1");
  }
  if (bias != nullptr) std::copy_n(bias, s.o, bias_.begin());
  std::vector<Tensor> taps;
  taps.reserve(kTaps);
  for (int e = 0; e < kTaps; ++e) taps.push_back(Tensor::empty(DType::kF32, {s.o, s.c}));
  double u[36];
  for (int64_t o = 0; o < s.o; ++o) {
    for (int64_t c = 0; c < s.c; ++c) {
      filter_transform(folded + (o * s.c + c) * 9, u);
      for (int e = 0; e < kTaps; ++e) taps[e].data<float>()[o * s.c + c] = static_cast<float>(u[e]);
    }
  }
  const int64_t tiles = tiles_of(s), chunk = chunk_tiles(s.c, s.o, tiles);
  products_.reserve(kTaps);
  for (int e = 0; e < kTaps; ++e) {
    products_.emplace_back(taps[e], /*weight_layout_nk=*/true, Tensor(), Epilogue::kNone, 1.0f,
                           1.0f, chunk);
    products_.back().prepare(chunk, s.c, s.o);
    if (tiles % chunk != 0) products_.back().prepare(tiles % chunk, s.c, s.o);
  }
}

void WinogradF4x3::run(const ConvShape& s, const float* x, float* y, const float* residual,
                       const RowEpilogue<float>& act) const {
  if (s.c != c_ || s.o != o_) {
    throw Error(fmt::format("WinogradF4x3: a {}->{} problem on {}->{} weights", s.c, s.o, c_, o_));
  }
  const int64_t tw = (s.ow + 3) / 4, per_image = ((s.oh + 3) / 4) * tw, tiles = tiles_of(s);
  if (tiles == 0) return;
  const int64_t chunk = chunk_tiles(c_, o_, tiles);
  const int64_t c_blocks = (c_ + kLanes - 1) / kLanes, o_blocks = (o_ + kLanes - 1) / kLanes;
  const Strides xs = strides_of(layouts_.src, c_, s.h, s.w),
                ys = strides_of(layouts_.dst, o_, s.oh, s.ow);
  const bool x_contiguous = xs.lane == 1, y_contiguous = ys.lane == 1;
  // From the tensor allocator, whose block cache keeps them from page-faulting on every call.
  Tensor v_buf = Tensor::empty(DType::kF32, {kTaps * chunk * c_});
  Tensor m_buf = Tensor::empty(DType::kF32, {kTaps * chunk * o_});
  float* v = v_buf.data<float>();
  float* m = m_buf.data<float>();
  for (int64_t t0 = 0; t0 < tiles; t0 += chunk) {
    const int64_t tb = std::min(chunk, tiles - t0);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < tb * c_blocks; ++k) {
      const int64_t t = t0 + k / c_blocks, cb = k % c_blocks, n = t / per_image;
      const int64_t ty = (t % per_image) / tw, tx = t % tw;
      const int lanes = static_cast<int>(std::min<int64_t>(kLanes, c_ - cb * kLanes));
      const float* base = x + n * xs.n + cb * xs.cb;
      float* dst = v + (k / c_blocks) * c_ + cb * kLanes;
      const int64_t y0 = ty * 4 - s.p.padding.h, x0 = tx * 4 - s.p.padding.w;
      const auto tile =
          x_contiguous ? (lanes == kLanes ? input_tile<true, true> : input_tile<true, false>)
                       : (lanes == kLanes ? input_tile<false, true> : input_tile<false, false>);
      tile(base, xs, s.h, s.w, y0, x0, lanes, dst, tb * c_);
    }
#pragma omp parallel for schedule(dynamic)
    for (int e = 0; e < kTaps; ++e) {
      products_[e].run(v + e * tb * c_, tb, c_, m + e * tb * o_, o_);
    }
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < tb * o_blocks; ++k) {
      const int64_t t = t0 + k / o_blocks, ob = k % o_blocks, n = t / per_image;
      const int64_t ty = (t % per_image) / tw, tx = t % tw;
      const int lanes = static_cast<int>(std::min<int64_t>(kLanes, o_ - ob * kLanes));
      const float* src = m + (k / o_blocks) * o_ + ob * kLanes;
      const int64_t offset = n * ys.n + ob * ys.cb;
      const float* res = residual != nullptr ? residual + offset : nullptr;
      Vec bias{};
      std::copy_n(bias_.data() + ob * kLanes, lanes, bias);
      const auto tile =
          y_contiguous ? (lanes == kLanes ? output_tile<true, true> : output_tile<true, false>)
                       : (lanes == kLanes ? output_tile<false, true> : output_tile<false, false>);
      tile(src, tb * o_, lanes, bias, ys, s.oh, s.ow, ty * 4, tx * 4, y + offset, res, act);
    }
  }
}

size_t WinogradF4x3::packed_bytes() const {
  size_t bytes = bias_.size() * sizeof(float);
  for (const PackedLinear& p : products_) bytes += p.packed_bytes();
  return bytes;
}

}  // namespace crucible::vision
