// batch_norm in its inference form: per channel (dim 1) scale = weight / sqrt(var + eps) and
// shift = bias - mean * scale, then one streaming pass y = x * scale + shift.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "reduction/reduction_internal.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

using reduction::kParallelGrain;

TensorType batch_norm_rule(std::span<const TensorType> in, const Attrs& attrs) {
  static const char* const kNames[] = {"input", "weight", "bias", "running_mean", "running_var"};
  const TensorType& x = in[0];
  if (!is_floating(x.dtype)) {
    throw Error(
        fmt::format("input must be floating-point (bf16, f32, f64), got {}", dtype_name(x.dtype)));
  }
  if (x.shape.size() < 2) {
    throw Error(fmt::format("input must have at least 2 dims [N,C,...], got {}-D {}",
                            x.shape.size(), shape_str(x.shape)));
  }
  const int64_t c = x.shape[1];
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != x.dtype) {
      throw Error(fmt::format("{} dtype {} differs from input dtype {}", kNames[i],
                              dtype_name(in[i].dtype), dtype_name(x.dtype)));
    }
    if (in[i].shape != Shape{c}) {
      throw Error(fmt::format("{} shape {} must be [{}], the channels (dim 1) of input {}",
                              kNames[i], shape_str(in[i].shape), c, shape_str(x.shape)));
    }
  }
  return x;
}

// Per-channel scale and shift in the compute type, with the same operations (and so the same
// rounding) as codegen's decomposition: rsqrt = 1 / sqrt(var + eps), scale = weight * rsqrt,
// shift = bias - mean * scale.
template <typename T>
void channel_affine(std::span<const Tensor> in, double eps, std::vector<compute_t<T>>& scale,
                    std::vector<compute_t<T>>& shift) {
  using Acc = compute_t<T>;
  const int64_t c = in[1].numel();
  const Tensor w = in[1].contiguous(), b = in[2].contiguous(), m = in[3].contiguous(),
               v = in[4].contiguous();
  const T *wp = w.data<T>(), *bp = b.data<T>(), *mp = m.data<T>(), *vp = v.data<T>();
  scale.resize(c);
  shift.resize(c);
  const Acc e = static_cast<Acc>(eps);  // bf16 computes in float, eps included (as PyTorch does)
  for (int64_t i = 0; i < c; ++i) {
    const Acc rstd = Acc(1) / std::sqrt(static_cast<Acc>(ew::load(vp[i])) + e);
    scale[i] = static_cast<Acc>(ew::load(wp[i])) * rstd;
    shift[i] = static_cast<Acc>(ew::load(bp[i])) - static_cast<Acc>(ew::load(mp[i])) * scale[i];
  }
}

Tensor batch_norm_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const TensorType ty = batch_norm_rule(ew::types_of(in), attrs);
  Tensor out = Tensor::empty(ty.dtype, ty.shape);
  if (out.numel() == 0) return out;
  const Tensor x = in[0].contiguous();
  const int64_t n = ty.shape[0], c = ty.shape[1], inner = out.numel() / (n * c);
  const double eps = attrs.get_float_or("eps", 1e-5);
  dispatch_float(ty.dtype, "batch_norm", [&]<typename T>() {
    using Acc = compute_t<T>;
    std::vector<Acc> scale, shift;
    channel_affine<T>(in, eps, scale, shift);
    const Acc *sc = scale.data(), *sh = shift.data();
    const T* xp = x.data<T>();
    T* yp = out.data<T>();
    const bool parallel = out.numel() >= kParallelGrain;
    if (inner == 1) {
      // [N, C]: rows of channels, the per-channel values vectors along the row.
#pragma omp parallel for schedule(static) if (parallel && n > 1)
      for (int64_t i = 0; i < n; ++i) {
        const T* xr = xp + i * c;
        T* yr = yp + i * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) yr[j] = ew::store<T>(ew::load(xr[j]) * sc[j] + sh[j]);
      }
      return;
    }
    // [N, C, inner]: each (n, c) plane, cut into chunks so that a few large planes still keep
    // every thread busy, is one vector loop with the channel's two values in registers.
    constexpr int64_t kChunk = 16384;
    const int64_t chunks = (inner + kChunk - 1) / kChunk, tasks = n * c * chunks;
#pragma omp parallel for schedule(static) if (parallel && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t plane = t / chunks, k0 = t % chunks * kChunk;
      const int64_t k1 = std::min(inner, k0 + kChunk);
      const Acc s = sc[plane % c], b = sh[plane % c];
      const T* xr = xp + plane * inner;
      T* yr = yp + plane * inner;
#pragma omp simd
      for (int64_t k = k0; k < k1; ++k) yr[k] = ew::store<T>(ew::load(xr[k]) * s + b);
    }
  });
  return out;
}

}  // namespace

// Inference: the statistics fold into one scale and shift per channel, x * scale + shift.
OpCost batch_norm_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  return streaming_cost(in, out, 2 * static_cast<double>(out.numel()));
}

void register_batch_norm_ops(OpRegistry& r) {
  r.add({{"batch_norm", 5, 5, {{"eps", AttrKind::kFloat, false}}},
         batch_norm_rule,
         batch_norm_kernel,
         batch_norm_cost});
}

}  // namespace crucible::vision
