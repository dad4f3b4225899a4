// The 2-D pools (max_pool2d, avg_pool2d, adaptive_avg_pool2d): type rules with PyTorch's output
// sizes and eager kernels over NCHW planes that accumulate in float (double for f64).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "reduction/reduction_internal.h"
#include "vision/pool_rows.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

using reduction::kParallelGrain;
using reduction::nan_max;

// ---- Type rules ----

// Output [.., OH, OW] of a windowed pool, or an Error when no window fits.
Hw pooled_hw(const TensorType& x, const PoolParams& p) {
  const size_t r = x.shape.size();
  const int64_t h = x.shape[r - 2], w = x.shape[r - 1];
  const Hw out{pool_out_size(h, p.kernel.h, p.stride.h, p.padding.h, p.dilation.h, p.ceil_mode),
               pool_out_size(w, p.kernel.w, p.stride.w, p.padding.w, p.dilation.w, p.ceil_mode)};
  if (out.h < 1 || out.w < 1) {
    throw Error(fmt::format(
        "kernel {}x{} (dilation {}x{}) is larger than the padded input {}x{} (input {}x{}, "
        "padding {}x{}): the output would be {}x{}",
        p.kernel.h, p.kernel.w, p.dilation.h, p.dilation.w,
        window_extent(__int128{h} + 2 * __int128{p.padding.h}),
        window_extent(__int128{w} + 2 * __int128{p.padding.w}), h, w, p.padding.h, p.padding.w,
        out.h, out.w));
  }
  return out;
}

TensorType with_hw(const TensorType& x, Hw hw) {
  TensorType t = x;
  t.shape[t.shape.size() - 2] = hw.h;
  t.shape[t.shape.size() - 1] = hw.w;
  return t;
}

TensorType window_pool_rule(std::span<const TensorType> in, const Attrs& attrs) {
  check_pool_input(in[0]);
  return with_hw(in[0], pooled_hw(in[0], pool_params(attrs)));
}

Hw adaptive_output(const Attrs& attrs) {
  const Hw out = pair_attr(attrs, "output_size", {0, 0});
  if (out.h < 0 || out.w < 0) {
    throw Error(fmt::format("output_size must be non-negative, got [{},{}]", out.h, out.w));
  }
  return out;
}

TensorType adaptive_rule(std::span<const TensorType> in, const Attrs& attrs) {
  check_pool_input(in[0]);
  return with_hw(in[0], adaptive_output(attrs));
}

// ---- Kernels ----

Planes as_planes(const Tensor& in) {
  const int64_t r = in.dim();
  Planes p{in.contiguous(), 1, in.shape()[r - 2], in.shape()[r - 1]};
  for (int64_t d = 0; d + 2 < r; ++d) p.planes *= in.shape()[d];
  return p;
}

Tensor max_pool2d_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const PoolParams p = pool_params(attrs);
  const TensorType ty = window_pool_rule(ew::types_of(in), attrs);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const Planes planes = as_planes(in[0]);
  const Hw hw{ty.shape[ty.shape.size() - 2], ty.shape.back()};
  dispatch_float(ty.dtype, "max_pool2d", [&]<typename T>() {
    using Acc = compute_t<T>;
    // Once NaN, an accumulator stays NaN: PyTorch's max pooling propagates NaN.
    pool_rows<T, Acc>(
        planes, out.data<T>(), hw, p, -std::numeric_limits<Acc>::infinity(),
        [](Acc a, Acc v) { return nan_max(a, v); },
        [&](int64_t, const Acc* acc, T* yr) {
#pragma omp simd
          for (int64_t ow = 0; ow < hw.w; ++ow) yr[ow] = ew::store<T>(acc[ow]);
        });
  });
  return out;
}

// Window extents along one dim for avg_pool2d's divisor: PyTorch counts the window clipped to the
// padded input (count_include_pad) or to the input itself.
std::vector<int64_t> avg_counts(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pad,
                                bool include_pad) {
  std::vector<int64_t> counts(out);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - pad, end = std::min(start + k, in + pad);
    counts[o] = include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0);
  }
  return counts;
}

Tensor avg_pool2d_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const PoolParams p = pool_params(attrs);
  const TensorType ty = window_pool_rule(ew::types_of(in), attrs);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const Planes planes = as_planes(in[0]);
  const Hw hw{ty.shape[ty.shape.size() - 2], ty.shape.back()};
  const std::vector<int64_t> ch =
      avg_counts(planes.h, hw.h, p.kernel.h, p.stride.h, p.padding.h, p.count_include_pad);
  const std::vector<int64_t> cw =
      avg_counts(planes.w, hw.w, p.kernel.w, p.stride.w, p.padding.w, p.count_include_pad);
  dispatch_float(ty.dtype, "avg_pool2d", [&]<typename T>() {
    using Acc = compute_t<T>;
    const int64_t* cwp = cw.data();
    pool_rows<T, Acc>(
        planes, out.data<T>(), hw, p, Acc(0), [](Acc a, Acc v) { return a + v; },
        [&](int64_t oh, const Acc* acc, T* yr) {
          const int64_t chh = ch[oh];
#pragma omp simd
          for (int64_t ow = 0; ow < hw.w; ++ow) {
            // An empty window (none occurs under the output-size rules) gives 0, as in PyTorch.
            const int64_t count = chh * cwp[ow];
            yr[ow] = ew::store<T>(count > 0 ? acc[ow] / static_cast<Acc>(count) : Acc(0));
          }
        });
  });
  return out;
}

// PyTorch's adaptive windows: output index o of n over an input of size in covers
// [floor(o * in / n), ceil((o + 1) * in / n)).
int64_t adaptive_start(int64_t o, int64_t in, int64_t n) { return o * in / n; }
int64_t adaptive_end(int64_t o, int64_t in, int64_t n) { return ((o + 1) * in + n - 1) / n; }

Tensor adaptive_avg_pool2d_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = adaptive_rule(ew::types_of(in), attrs);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const Planes pl = as_planes(in[0]);
  const Hw hw = adaptive_output(attrs);
  dispatch_float(ty.dtype, "adaptive_avg_pool2d", [&]<typename T>() {
    using Acc = compute_t<T>;
    const T* x = pl.x.data<T>();
    T* y = out.data<T>();
    const int64_t rows = pl.planes * hw.h;
#pragma omp parallel for schedule(static) if (pl.planes * pl.h * pl.w >= kParallelGrain && rows > 1)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t plane = row / hw.h, oh = row % hw.h;
      const int64_t h0 = adaptive_start(oh, pl.h, hw.h), h1 = adaptive_end(oh, pl.h, hw.h);
      const T* xp = x + plane * pl.h * pl.w;
      for (int64_t ow = 0; ow < hw.w; ++ow) {
        const int64_t w0 = adaptive_start(ow, pl.w, hw.w), w1 = adaptive_end(ow, pl.w, hw.w);
        Acc sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          const T* xr = xp + ih * pl.w;
#pragma omp simd reduction(+ : sum)
          for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<Acc>(ew::load(xr[iw]));
        }
        // Two divisions, in PyTorch's order.
        y[row * hw.w + ow] =
            ew::store<T>(sum / static_cast<Acc>(h1 - h0) / static_cast<Acc>(w1 - w0));
      }
    }
  });
  return out;
}

// One comparison or addition per window element of each result.
OpCost window_pool_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& attrs) {
  double window = 1;
  for (int64_t k : attrs.get_ints("kernel_size")) window *= static_cast<double>(k);
  if (attrs.get_ints("kernel_size").size() == 1) window *= window;  // one size for both dims
  return streaming_cost(in, out, window * static_cast<double>(out.numel()));
}

OpCost adaptive_pool_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, static_cast<double>(in[0].numel()));
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  const AttrSpec kernel{"kernel_size", AttrKind::kInts, true}, stride{"stride", AttrKind::kInts},
      padding{"padding", AttrKind::kInts}, ceil_mode{"ceil_mode", AttrKind::kBool};
  r.add({{"max_pool2d", 1, 1, {kernel, stride, padding, {"dilation", AttrKind::kInts}, ceil_mode}},
         window_pool_rule,
         max_pool2d_kernel,
         window_pool_cost});
  r.add({{"avg_pool2d",
          1,
          1,
          {kernel, stride, padding, ceil_mode, {"count_include_pad", AttrKind::kBool}}},
         window_pool_rule,
         avg_pool2d_kernel,
         window_pool_cost});
  r.add({{"adaptive_avg_pool2d", 1, 1, {{"output_size", AttrKind::kInts, true}}},
         adaptive_rule,
         adaptive_avg_pool2d_kernel,
         adaptive_pool_cost});
}

}  // namespace crucible::vision
