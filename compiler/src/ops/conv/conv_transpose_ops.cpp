// conv_transpose2d: PyTorch's transposed convolution (the gradient of conv2d with respect to its
// input), weight [Cin, Cout/groups, kH, kW]. Its type rule follows torch's output size and
// checks; the eager kernel runs f32 on oneDNN's deconvolution (conv_transpose2d_f32.cpp), and
// the rest (f64 for the reference, bf16, an output padding past the padding) in a direct loop
// that scatters each input pixel into one output plane at a time, so every thread owns the
// planes it writes.
#include <fmt/format.h>

#include <vector>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

DeconvShape transpose_shape(std::span<const TensorType> in, const Attrs& attrs) {
  static const char* const kNames[] = {"input", "weight", "bias"};
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype) || in[i].dtype != in[0].dtype) {
      throw Error(
          fmt::format("{} dtype {} must be floating-point (bf16, f32, f64) and match the "
                      "input's {}",
                      kNames[i], dtype_name(in[i].dtype), dtype_name(in[0].dtype)));
    }
  }
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (x.size() != 4)
    throw Error(fmt::format("input must be 4-D [N,C,H,W], got {}-D {}", x.size(), shape_str(x)));
  if (w.size() != 4) {
    throw Error(fmt::format("weight must be 4-D [in_channels, out_channels/groups, kH, kW], got {}",
                            shape_str(w)));
  }
  if (x[1] == 0 || x[2] == 0 || x[3] == 0) {
    throw Error(fmt::format("input {} must have non-empty C, H and W (N may be 0), as torch's does",
                            shape_str(x)));
  }
  DeconvShape s;
  s.p = conv_params(attrs);
  s.output_padding = pair_attr(attrs, "output_padding", {0, 0});
  s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
  s.kh = w[2], s.kw = w[3];
  const int64_t g = s.p.groups;
  if (w[0] != s.c) {
    throw Error(fmt::format("weight {} takes {} input channels, but input {} has {}", shape_str(w),
                            w[0], shape_str(x), s.c));
  }
  if (s.c % g != 0)
    throw Error(fmt::format("input channels {} are not divisible by groups={}", s.c, g));
  s.o = w[1] * g;
  if (s.kh < 1 || s.kw < 1) throw Error(fmt::format("weight {} has an empty kernel", shape_str(w)));
  if (in.size() > 2 && in[2].shape != Shape{s.o}) {
    throw Error(fmt::format("bias shape {} must be [{}] (out_channels/groups x groups)",
                            shape_str(in[2].shape), s.o));
  }
  const Hw& op = s.output_padding;
  if (op.h < 0 || op.w < 0 || (op.h >= s.p.stride.h && op.h >= s.p.dilation.h) ||
      (op.w >= s.p.stride.w && op.w >= s.p.dilation.w)) {
    throw Error(fmt::format(
        "output_padding {}x{} must be non-negative and smaller than the stride {}x{} or the "
        "dilation {}x{}",
        op.h, op.w, s.p.stride.h, s.p.stride.w, s.p.dilation.h, s.p.dilation.w));
  }
  s.oh = vision::window_extent(__int128{s.h - 1} * s.p.stride.h - 2 * __int128{s.p.padding.h} +
                               __int128{s.p.dilation.h} * (s.kh - 1) + op.h + 1);
  s.ow = vision::window_extent(__int128{s.w - 1} * s.p.stride.w - 2 * __int128{s.p.padding.w} +
                               __int128{s.p.dilation.w} * (s.kw - 1) + op.w + 1);
  if (s.oh < 1 || s.ow < 1) {
    throw Error(fmt::format("the output would be {}x{} (input {}x{}, kernel {}x{}, padding {}x{})",
                            s.oh, s.ow, s.h, s.w, s.kh, s.kw, s.p.padding.h, s.p.padding.w));
  }
  return s;
}

TensorType conv_transpose2d_rule(std::span<const TensorType> in, const Attrs& attrs) {
  const DeconvShape s = transpose_shape(in, attrs);
  return {in[0].dtype, {s.n, s.o, s.oh, s.ow}};
}

Tensor conv_transpose2d_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const DeconvShape s = transpose_shape(ew::types_of(in), attrs);
  Tensor out = Tensor::empty(in[0].dtype(), {s.n, s.o, s.oh, s.ow});
  if (out.numel() == 0) return out;
  const Tensor x = in[0].contiguous(), w = in[1].contiguous();
  const Tensor b = in.size() > 2 ? in[2].contiguous() : Tensor();
  if (x.dtype() == DType::kF32 &&
      conv_transpose2d_f32(s, x.data<float>(), w.data<float>(),
                           b.defined() ? b.data<float>() : nullptr, out.data<float>()))
    return out;
  const int64_t cg = s.c / s.p.groups, og = s.o / s.p.groups, plane = s.oh * s.ow;
  const int64_t in_plane = s.h * s.w, taps = s.kh * s.kw;
  dispatch_float(x.dtype(), "conv_transpose2d", [&]<typename T>() {
    using C = compute_t<T>;
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    const T* bp = b.defined() ? b.data<T>() : nullptr;
    T* yp = out.data<T>();
#pragma omp parallel
    {
      std::vector<C> acc(static_cast<size_t>(plane));
#pragma omp for schedule(static)
      for (int64_t np = 0; np < s.n * s.o; ++np) {
        const int64_t n = np / s.o, o = np % s.o, g = o / og, oc = o % og;
        std::fill(acc.begin(), acc.end(), bp != nullptr ? static_cast<C>(bp[o]) : C(0));
        for (int64_t ci = g * cg; ci < (g + 1) * cg; ++ci) {
          const T* xc = xp + (n * s.c + ci) * in_plane;
          const T* wc = wp + (ci * og + oc) * taps;
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            for (int64_t iy = 0; iy < s.h; ++iy) {
              const int64_t y = iy * s.p.stride.h - s.p.padding.h + ky * s.p.dilation.h;
              if (y < 0 || y >= s.oh) continue;
              C* row = acc.data() + y * s.ow;
              const T* xr = xc + iy * s.w;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const auto wv = static_cast<C>(wc[ky * s.kw + kx]);
                const int64_t off = kx * s.p.dilation.w - s.p.padding.w;
                for (int64_t ix = 0; ix < s.w; ++ix) {
                  const int64_t xo = ix * s.p.stride.w + off;
                  if (xo >= 0 && xo < s.ow) row[xo] += static_cast<C>(xr[ix]) * wv;
                }
              }
            }
          }
        }
        T* yo = yp + np * plane;
        for (int64_t i = 0; i < plane; ++i) yo[i] = static_cast<T>(acc[i]);
      }
    }
  });
  return out;
}

}  // namespace

// Weight [Cin, Cout/groups, kh, kw]: each input element scatters into Cout/groups * kh * kw
// results.
OpCost conv_transpose2d_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  const Shape& w = in[1].shape;
  return contraction_cost(
      in, out, static_cast<double>(in[0].numel()) * static_cast<double>(w[1] * w[2] * w[3]),
      in.size() > 2 ? static_cast<double>(out.numel()) : 0);
}

void register_conv_transpose_ops(OpRegistry& r) {
  r.add({{"conv_transpose2d",
          2,
          3,
          {{"stride", AttrKind::kInts, false},
           {"padding", AttrKind::kInts, false},
           {"output_padding", AttrKind::kInts, false},
           {"dilation", AttrKind::kInts, false},
           {"groups", AttrKind::kInt, false}}},
         conv_transpose2d_rule,
         conv_transpose2d_kernel,
         conv_transpose2d_cost});
}

}  // namespace crucible::vision
