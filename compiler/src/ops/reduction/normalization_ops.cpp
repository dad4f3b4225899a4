// The normalization ops (softmax, log_softmax, layer_norm): type rules and numerically stable eager
// kernels that accumulate in float (double for f64) and vectorize along the contiguous dimension.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "crucible/core/error.h"
#include "reduction/reduction_internal.h"
#include "register_ops.h"

namespace crucible::reduction {
namespace {

// softmax / log_softmax over dim d of a contiguous [A, R, B] view. Subtracting the row maximum
// keeps exp in range (a row of 1000, 1001 is exact), and NaN anywhere in a row makes it all NaN.
template <typename T, bool kLog>
void softmax_rows(const T* x, T* o, int64_t a, int64_t r) {
  using Acc = compute_t<T>;
  constexpr Acc kNegInf = -std::numeric_limits<Acc>::infinity();
#pragma omp parallel for schedule(static) if (worth_parallel(a * r, kTranscendentalCost) && a > 1)
  for (int64_t ai = 0; ai < a; ++ai) {
    const T* xr = x + ai * r;
    T* orow = o + ai * r;
    const crucible_fast::Limits lim = crucible_fast::limits();  // per row, outside the loops
    const Acc m = lane_fold<Acc>(r, kNegInf, nan_max<Acc>,
                                 [&](int64_t i) { return static_cast<Acc>(xr[i]); });
    if constexpr (kLog) {
      const double s = lane_sum<Acc, double>(
          r, [&](int64_t i) { return exp_acc(static_cast<Acc>(xr[i]) - m, lim); });
      const Acc log_s = static_cast<Acc>(std::log(s));
#pragma omp simd
      for (int64_t i = 0; i < r; ++i) store_as(orow + i, (static_cast<Acc>(xr[i]) - m) - log_s);
    } else if constexpr (std::is_same_v<T, Acc>) {
      // Store the exponentials while summing them, then scale: one exp per element.
      const double s = lane_sum<Acc, double>(r, [&](int64_t i) {
        const Acc e = exp_acc(xr[i] - m, lim);
        orow[i] = e;
        return e;
      });
      const Acc inv = static_cast<Acc>(1.0 / s);
#pragma omp simd
      for (int64_t i = 0; i < r; ++i) orow[i] *= inv;
    } else {
      // bf16 storage would round the stored exponentials, so recompute them in float instead.
      const double s = lane_sum<Acc, double>(
          r, [&](int64_t i) { return exp_acc(static_cast<Acc>(xr[i]) - m, lim); });
      const Acc inv = static_cast<Acc>(1.0 / s);
#pragma omp simd
      for (int64_t i = 0; i < r; ++i)
        store_as(orow + i, exp_acc(static_cast<Acc>(xr[i]) - m, lim) * inv);
    }
  }
}

// softmax over a non-innermost dimension: per column tile, max, then sum, then output, each pass
// walking the R rows with a contiguous inner loop over the tile's columns. Tiles are as wide as
// the threads allow: whole rows stream through the hardware prefetchers, while tiles narrower
// than a 4 KiB page restart them on every row (3x slower on a [8192, 1024] softmax over dim 0).
// A column's arithmetic does not depend on the tiling, so the tiling may follow the thread count.
template <typename T, bool kLog>
void softmax_columns(const T* x, T* o, int64_t a, int64_t r, int64_t b) {
  using Acc = compute_t<T>;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t width = b;
  if (a < threads) {
    const int64_t per_row = (threads + a - 1) / a;
    width = std::max<int64_t>((b + per_row - 1) / per_row, 1);
    width = (width + 15) / 16 * 16;  // keep tile starts aligned for the vector loops
  }
  const int64_t ntiles = (b + width - 1) / width;
#pragma omp parallel for schedule(static) if (worth_parallel(a * r * b, kTranscendentalCost) && \
                                              a * ntiles > 1)
  for (int64_t task = 0; task < a * ntiles; ++task) {
    const int64_t ai = task / ntiles, j0 = task % ntiles * width, jn = std::min(width, b - j0);
    const T* xt = x + ai * r * b + j0;
    T* ot = o + ai * r * b + j0;
    const crucible_fast::Limits lim = crucible_fast::limits();
    std::vector<Acc> m_buf(jn, -std::numeric_limits<Acc>::infinity()), part_buf(jn, 0),
        scale_buf(jn);
    std::vector<double> sum_buf(jn, 0.0);
    Acc* m = m_buf.data();
    Acc* part = part_buf.data();
    Acc* scale = scale_buf.data();
    double* sum = sum_buf.data();
    for (int64_t i = 0; i < r; ++i) {
#pragma omp simd
      for (int64_t j = 0; j < jn; ++j) m[j] = nan_max(m[j], static_cast<Acc>(xt[i * b + j]));
    }
    // f32/f64 store the exponentials on the way and rescale them; bf16 recomputes them instead.
    constexpr bool kStore = !kLog && std::is_same_v<T, Acc>;
    for (int64_t i0 = 0; i0 < r; i0 += kRowBlock) {
      const int64_t i1 = std::min(r, i0 + kRowBlock);
      for (int64_t i = i0; i < i1; ++i) {
#pragma omp simd
        for (int64_t j = 0; j < jn; ++j) {
          const Acc e = exp_acc(static_cast<Acc>(xt[i * b + j]) - m[j], lim);
          if constexpr (kStore) ot[i * b + j] = e;
          part[j] += e;
        }
      }
      for (int64_t j = 0; j < jn; ++j) {
        sum[j] += part[j];
        part[j] = 0;
      }
    }
    for (int64_t j = 0; j < jn; ++j) {
      scale[j] = kLog ? static_cast<Acc>(std::log(sum[j])) : static_cast<Acc>(1.0 / sum[j]);
    }
    for (int64_t i = 0; i < r; ++i) {
      const T* xrow = xt + i * b;
      T* orow = ot + i * b;
#pragma omp simd
      for (int64_t j = 0; j < jn; ++j) {
        if constexpr (kLog) {
          store_as(orow + j, (static_cast<Acc>(xrow[j]) - m[j]) - scale[j]);
        } else if constexpr (kStore) {
          orow[j] *= scale[j];
        } else {
          store_as(orow + j, exp_acc(static_cast<Acc>(xrow[j]) - m[j], lim) * scale[j]);
        }
      }
    }
  }
}

template <bool kLog>
Tensor softmax_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor x = in[0].contiguous();
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "dim");
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  if (x.numel() == 0) return out;
  int64_t a = 1, b = 1;
  const int64_t r = x.dim() == 0 ? 1 : x.shape()[d];
  for (int64_t i = 0; i < d; ++i) a *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) b *= x.shape()[i];
  dispatch_float(x.dtype(), kLog ? "log_softmax" : "softmax", [&]<typename T>() {
    if (b == 1) {
      softmax_rows<T, kLog>(x.data<T>(), out.data<T>(), a, r);
    } else {
      softmax_columns<T, kLog>(x.data<T>(), out.data<T>(), a, r, b);
    }
  });
  return out;
}

TensorType softmax_rule(std::span<const TensorType> in, const Attrs& attrs) {
  require_floating(in[0].dtype, "input");
  wrap_dim(attrs.get_int("dim"), static_cast<int64_t>(in[0].shape.size()), "dim");
  return in[0];
}

// layer_norm over the trailing normalized_shape: per row, mean and biased variance (two passes, in
// float lanes with double block totals; double for f64), then (x - mean) * rstd * weight + bias.
// Both passes work on the row shifted by its first element: a constant row then centers to exact
// zeros, as PyTorch's Welford moments give. The plain mean of n copies of x is not always x, and at
// large magnitudes (|x| above ~1e14 for eps 1e-5) the deviations it leaves dwarf eps and normalize
// to +-1 instead of 0.
Tensor layer_norm_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const Tensor x = in[0].contiguous();
  const Tensor w = in.size() > 1 ? in[1].contiguous() : Tensor();
  const Tensor bias = in.size() > 2 ? in[2].contiguous() : Tensor();
  const double eps = attrs.get_float_or("eps", 1e-5);
  int64_t n = 1;
  for (int64_t s : attrs.get_ints("normalized_shape")) n *= s;
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  if (x.numel() == 0) return out;
  const int64_t rows = x.numel() / n;
  dispatch_float(x.dtype(), "layer_norm", [&]<typename T>() {
    using Acc = compute_t<T>;
    const T* xp = x.data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* bp = bias.defined() ? bias.data<T>() : nullptr;
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && rows > 1)
    for (int64_t row = 0; row < rows; ++row) {
      const T* xr = xp + row * n;
      T* orow = op + row * n;
      const Acc first = static_cast<Acc>(xr[0]);
      auto shifted = [&](int64_t i) { return static_cast<Acc>(static_cast<Acc>(xr[i]) - first); };
      const Acc mean = static_cast<Acc>(lane_sum<Acc, double>(n, shifted) / n);  // of x - first
      const double var = lane_sum<Acc, double>(n,
                                               [&](int64_t i) {
                                                 const Acc dev = shifted(i) - mean;
                                                 return dev * dev;
                                               }) /
                         n;
      const Acc rstd = static_cast<Acc>(1.0 / std::sqrt(var + eps));
      if (wp != nullptr && bp != nullptr) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          store_as(orow + i,
                   (shifted(i) - mean) * rstd * static_cast<Acc>(wp[i]) + static_cast<Acc>(bp[i]));
        }
      } else if (wp != nullptr) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          store_as(orow + i, (shifted(i) - mean) * rstd * static_cast<Acc>(wp[i]));
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) store_as(orow + i, (shifted(i) - mean) * rstd);
      }
    }
  });
  return out;
}

TensorType layer_norm_rule(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  require_floating(x.dtype, "input");
  const std::vector<int64_t>& ns = attrs.get_ints("normalized_shape");
  if (ns.empty()) throw Error("normalized_shape must have at least one dimension");
  const bool fits =
      ns.size() <= x.shape.size() &&
      std::equal(ns.begin(), ns.end(), x.shape.end() - static_cast<int64_t>(ns.size()));
  if (!fits) {
    throw Error(
        fmt::format("normalized_shape {} does not match the trailing dimensions of input shape {}",
                    shape_str(ns), shape_str(x.shape)));
  }
  const char* names[] = {"input", "weight", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != x.dtype) {
      throw Error(fmt::format("{} dtype {} differs from input dtype {}", names[i],
                              dtype_name(in[i].dtype), dtype_name(x.dtype)));
    }
    if (in[i].shape != Shape(ns.begin(), ns.end())) {
      throw Error(fmt::format("{} shape {} must equal normalized_shape {}", names[i],
                              shape_str(in[i].shape), shape_str(ns)));
    }
  }
  return x;
}

}  // namespace

// Per element: the max, the subtraction, exp, the sum and the division (or log's subtraction).
OpCost softmax_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, 5 * static_cast<double>(out.numel()));
}

// Per element: the mean (1), the variance (subtract, square, add: 3), normalizing (2), and one
// each for the weight and the bias when given.
OpCost layer_norm_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out,
                        static_cast<double>(6 + in.size() - 1) * static_cast<double>(out.numel()));
}

void register_normalization_ops(OpRegistry& r) {
  r.add({{"softmax", 1, 1, {{"dim", AttrKind::kInt, true}}},
         softmax_rule,
         softmax_kernel<false>,
         softmax_cost});
  r.add({{"log_softmax", 1, 1, {{"dim", AttrKind::kInt, true}}},
         softmax_rule,
         softmax_kernel<true>,
         softmax_cost});
  r.add({{"layer_norm",
          1,
          3,
          {{"normalized_shape", AttrKind::kInts, true}, {"eps", AttrKind::kFloat, false}}},
         layer_norm_rule,
         layer_norm_kernel,
         layer_norm_cost});
}

}  // namespace crucible::reduction
