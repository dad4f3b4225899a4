// conv2d: its type rule (channels, groups, kernel against the padded input) and the eager kernel,
// which makes operands contiguous and hands them to the f32 (oneDNN) or f64 back end.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

void require_same_float(std::span<const TensorType> in) {
  static const char* const kNames[] = {"input", "weight", "bias"};
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype)) {
      throw Error(fmt::format("{} must be floating-point (bf16, f32, f64), got {}", kNames[i],
                              dtype_name(in[i].dtype)));
    }
    if (in[i].dtype != in[0].dtype) {
      throw Error(fmt::format("{} dtype {} differs from input dtype {}; cast first", kNames[i],
                              dtype_name(in[i].dtype), dtype_name(in[0].dtype)));
    }
  }
}

}  // namespace

ConvShape conv_shape(std::span<const TensorType> in, const Attrs& attrs) {
  require_same_float(in);
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (x.size() != 4)
    throw Error(fmt::format("input must be 4-D [N,C,H,W], got {}-D {}", x.size(), shape_str(x)));
  if (w.size() != 4) {
    throw Error(fmt::format("weight must be 4-D [out_channels, in_channels/groups, kH, kW], got {}",
                            shape_str(w)));
  }
  ConvShape s;
  s.p = conv_params(attrs);
  s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
  s.o = w[0], s.kh = w[2], s.kw = w[3];
  const int64_t g = s.p.groups;
  if (s.c % g != 0)
    throw Error(fmt::format("input channels {} are not divisible by groups={}", s.c, g));
  if (s.o % g != 0) {
    throw Error(fmt::format("weight {} has {} output channels, not divisible by groups={}",
                            shape_str(w), s.o, g));
  }
  if (w[1] * g != s.c) {
    throw Error(fmt::format(
        "weight {} takes {} input channels per group ({} for groups={}), but input {} has {}",
        shape_str(w), w[1], w[1] * g, g, shape_str(x), s.c));
  }
  if (s.kh < 1 || s.kw < 1) throw Error(fmt::format("weight {} has an empty kernel", shape_str(w)));
  if (in.size() > 2 && in[2].shape != Shape{s.o}) {
    throw Error(fmt::format("bias shape {} must be [{}] (the weight's output channels)",
                            shape_str(in[2].shape), s.o));
  }
  const int64_t ekh = window_extent(__int128{s.p.dilation.h} * (s.kh - 1) + 1),
                ekw = window_extent(__int128{s.p.dilation.w} * (s.kw - 1) + 1);
  const int64_t ph = window_extent(__int128{s.h} + 2 * __int128{s.p.padding.h}),
                pw = window_extent(__int128{s.w} + 2 * __int128{s.p.padding.w});
  if (ekh > ph || ekw > pw) {
    throw Error(
        fmt::format("kernel {}x{} (dilation {}x{}, so {}x{}) is larger than the padded input {}x{} "
                    "(input {}x{}, padding {}x{})",
                    s.kh, s.kw, s.p.dilation.h, s.p.dilation.w, ekh, ekw, ph, pw, s.h, s.w,
                    s.p.padding.h, s.p.padding.w));
  }
  s.oh = conv_out_size(s.h, s.kh, s.p.stride.h, s.p.padding.h, s.p.dilation.h);
  s.ow = conv_out_size(s.w, s.kw, s.p.stride.w, s.p.padding.w, s.p.dilation.w);
  return s;
}

namespace {

TensorType conv2d_rule(std::span<const TensorType> in, const Attrs& attrs) {
  const ConvShape s = conv_shape(in, attrs);
  return {in[0].dtype, {s.n, s.o, s.oh, s.ow}};
}

Tensor conv2d_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const ConvShape s = conv_shape(ew::types_of(in), attrs);
  const DType dtype = in[0].dtype();
  Tensor out = Tensor::empty(dtype, {s.n, s.o, s.oh, s.ow});
  if (out.numel() == 0) return out;
  const bool has_bias = in.size() > 2;
  if (in[0].numel() == 0 || in[1].numel() == 0) {
    // No channel or no input pixel: every output sums nothing but padding, so it is the bias.
    if (has_bias) {
      out.copy_from(in[2].reshape(std::vector<int64_t>{1, s.o, 1, 1}).expand(out.shape()));
    } else {
      std::memset(out.raw_data(), 0, out.nbytes());  // all-zero bytes are 0.0 in every float type
    }
    return out;
  }
  const bool depthwise = s.c == s.p.groups && s.p.groups > 1;
  if (dtype == DType::kF64) {
    const Tensor x = in[0].contiguous(), w = in[1].contiguous();
    const Tensor b = has_bias ? in[2].contiguous() : Tensor();
    const double* bp = has_bias ? b.data<double>() : nullptr;
    if (depthwise) {
      conv2d_depthwise<double>(s, x.data<double>(), w.data<double>(), bp, out.data<double>());
    } else {
      conv2d_f64(s, x.data<double>(), w.data<double>(), bp, out.data<double>());
    }
    return out;
  }
  // f32 directly; bf16 widened to f32 (oneDNN's bf16 convolutions need AVX-512 BF16 hardware,
  // and PyTorch's CPU bf16 convolution accumulates in f32 as well), rounded once at the end.
  auto as_f32 = [](const Tensor& t) {
    return t.dtype() == DType::kF32 ? t.contiguous() : t.to(DType::kF32);
  };
  const Tensor x = as_f32(in[0]), w = as_f32(in[1]);
  const Tensor b = has_bias ? as_f32(in[2]) : Tensor();
  Tensor acc = dtype == DType::kF32 ? out : Tensor::empty(DType::kF32, out.shape());
  const float* bp = has_bias ? b.data<float>() : nullptr;
  // Depthwise runs our direct NCHW loop: oneDNN's depthwise kernel needs channel-blocked
  // activations, and reordering them in and out costs twice the whole direct loop (see
  // docs/design_decisions.md).
  if (depthwise) {
    conv2d_depthwise<float>(s, x.data<float>(), w.data<float>(), bp, acc.data<float>());
  } else {
    conv2d_f32(s, x.data<float>(), w.data<float>(), bp, acc.data<float>());
  }
  if (dtype != DType::kF32) out.copy_from(acc);
  return out;
}

}  // namespace

// Weight [Cout, Cin/groups, kh, kw]: each result element sums Cin/groups * kh * kw products.
OpCost conv2d_cost(std::span<const TensorType> in, const TensorType& out, const Attrs&) {
  const Shape& w = in[1].shape;
  const auto n = static_cast<double>(out.numel());
  return contraction_cost(in, out, n * static_cast<double>(w[1] * w[2] * w[3]),
                          in.size() > 2 ? n : 0);
}

void register_conv_ops(OpRegistry& r) {
  r.add({{"conv2d",
          2,
          3,
          {{"stride", AttrKind::kInts, false},
           {"padding", AttrKind::kInts, false},
           {"dilation", AttrKind::kInts, false},
           {"groups", AttrKind::kInt, false}}},
         conv2d_rule,
         conv2d_kernel,
         conv2d_cost});
}

}  // namespace crucible::vision
