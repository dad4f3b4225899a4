// resize: ONNX Resize (opset 11/13) on the H and W of an NCHW tensor, nearest or bilinear, with
// ONNX's coordinate transformations and rounding modes. The source coordinate of each output row
// and column is computed once, in double, exactly as ONNX's reference (resize.py) computes it.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "elementwise/elementwise_loop.h"
#include "vision/vision_internal.h"

namespace crucible::vision {
namespace {

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeArgs {
  bool linear = false;
  Coord coord = Coord::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  Shape out;
  double scale_h = 0, scale_w = 0;  // ONNX's scale per dim: the given one, else out / in
};

template <typename E>
E pick(const Attrs& attrs, const char* name, const char* fallback,
       std::initializer_list<std::pair<const char*, E>> choices) {
  const std::string v = attrs.get_string_or(name, fallback);
  std::string names;
  for (const auto& [n, e] : choices) {
    if (v == n) return e;
    names += fmt::format("{}'{}'", names.empty() ? "" : ", ", n);
  }
  throw Error(fmt::format("{} must be one of {}, got '{}'", name, names, v));
}

ResizeArgs resize_args(const TensorType& x, const Attrs& attrs) {
  if (!is_floating(x.dtype)) {
    throw Error(
        fmt::format("input must be floating-point (bf16, f32, f64), got {}", dtype_name(x.dtype)));
  }
  if (x.shape.size() != 4) {
    throw Error(fmt::format("input must be 4-D [N,C,H,W], got {}-D {}", x.shape.size(),
                            shape_str(x.shape)));
  }
  ResizeArgs a;
  a.linear = pick<bool>(attrs, "mode", "nearest", {{"nearest", false}, {"linear", true}});
  a.coord = pick<Coord>(attrs, "coordinate_transformation_mode", "half_pixel",
                        {{"half_pixel", Coord::kHalfPixel},
                         {"pytorch_half_pixel", Coord::kPytorchHalfPixel},
                         {"align_corners", Coord::kAlignCorners},
                         {"asymmetric", Coord::kAsymmetric},
                         {"tf_half_pixel_for_nn", Coord::kTfHalfPixelForNn}});
  a.rounding = pick<Rounding>(attrs, "nearest_mode", "round_prefer_floor",
                              {{"round_prefer_floor", Rounding::kRoundPreferFloor},
                               {"round_prefer_ceil", Rounding::kRoundPreferCeil},
                               {"floor", Rounding::kFloor},
                               {"ceil", Rounding::kCeil}});
  const std::vector<int64_t>& sizes = attrs.get_ints("sizes");
  if (sizes.size() != 4 || sizes[0] != x.shape[0] || sizes[1] != x.shape[1]) {
    throw Error(fmt::format("sizes {} must be the output shape [N, C, OH, OW] of input {}",
                            shape_str(sizes), shape_str(x.shape)));
  }
  for (int i = 2; i < 4; ++i) {
    if (sizes[i] < 0) throw Error(fmt::format("sizes {} has a negative dim", shape_str(sizes)));
    if (sizes[i] > 0 && x.shape[i] == 0) {
      throw Error(fmt::format("cannot resize an empty dim {} of input {} to {}", i,
                              shape_str(x.shape), sizes[i]));
    }
  }
  a.out = sizes;
  auto scale = [&](const char* name, int d) {
    const bool none = x.shape[d] == 0 || sizes[d] == 0;  // no coordinate is ever computed
    const double s = attrs.get_float_or(
        name, none ? 1.0 : static_cast<double>(sizes[d]) / static_cast<double>(x.shape[d]));
    if (!(s > 0) || !std::isfinite(s))
      throw Error(fmt::format("{} must be positive and finite, got {}", name, s));
    return s;
  };
  a.scale_h = scale("scale_h", 2);
  a.scale_w = scale("scale_w", 3);
  return a;
}

TensorType resize_rule(std::span<const TensorType> in, const Attrs& attrs) {
  return {in[0].dtype, resize_args(in[0], attrs).out};
}

// The input coordinate of output position x along a dim of `in` elements resized by `scale`,
// ONNX's formulas (the reference's order of operations, so its rounding decisions are ours).
double source_coord(const ResizeArgs& a, int64_t x, int64_t in, double scale) {
  const double xd = static_cast<double>(x), out = scale * static_cast<double>(in);
  switch (a.coord) {
    case Coord::kAlignCorners:
      return out == 1 ? 0.0 : xd * static_cast<double>(in - 1) / (out - 1);
    case Coord::kAsymmetric:
      return xd / scale;
    case Coord::kPytorchHalfPixel:
      return out == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
    case Coord::kTfHalfPixelForNn:
      return (xd + 0.5) / scale;
    case Coord::kHalfPixel:
      break;
  }
  return (xd + 0.5) / scale - 0.5;
}

int64_t clamp_index(int64_t i, int64_t in) { return std::clamp<int64_t>(i, 0, in - 1); }

// Per output position along one dim: the two input indices it reads and the second one's weight
// (nearest: both the same index, weight 0).
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<double> w;
};

Taps taps(const ResizeArgs& a, int64_t in, int64_t out, double scale) {
  Taps t;
  for (int64_t x = 0; x < out; ++x) {
    if (in == out && scale == 1) {
      // An unresized dim reads each element alone (every mode maps x to x), as torch does.
      t.lo.push_back(x);
      t.hi.push_back(x);
      t.w.push_back(0.0);
      continue;
    }
    const double src = source_coord(a, x, in, scale);
    if (a.linear) {
      // ONNX's linear taps (the neighbors clamped to the edge), in torch's bilinear shape: a
      // coordinate below 0 reads 0 and 1 with weights 1 and 0, one past the last element reads
      // the last twice, so a NaN or inf spreads from the same taps in both.
      const double from = std::max(src, 0.0);
      const auto base = static_cast<int64_t>(std::floor(from));
      const bool past = base >= in - 1;
      t.lo.push_back(past ? in - 1 : base);
      t.hi.push_back(past ? in - 1 : base + 1);
      t.w.push_back(past ? 0.0 : from - static_cast<double>(base));
      continue;
    }
    const double fl = std::floor(src);
    const double ratio = src - fl;
    const auto base = static_cast<int64_t>(fl);
    bool up = false;  // ceil rather than floor
    if (ratio != 0) {
      switch (a.rounding) {
        case Rounding::kRoundPreferFloor:
          up = ratio > 0.5;
          break;
        case Rounding::kRoundPreferCeil:
          up = ratio >= 0.5;
          break;
        case Rounding::kFloor:
          break;
        case Rounding::kCeil:
          up = true;
          break;
      }
    }
    const int64_t i = clamp_index(base + (up ? 1 : 0), in);
    t.lo.push_back(i);
    t.hi.push_back(i);
    t.w.push_back(0.0);
  }
  return t;
}

Tensor resize_kernel(std::span<const Tensor> in, const Attrs& attrs) {
  const ResizeArgs a = resize_args(ew::type_of(in[0]), attrs);
  Tensor out = Tensor::empty(in[0].dtype(), a.out);
  if (out.numel() == 0) return out;
  const Tensor x = in[0].contiguous();
  const int64_t h = x.shape()[2], w = x.shape()[3], oh = a.out[2], ow = a.out[3];
  const int64_t planes = a.out[0] * a.out[1];
  const Taps th = taps(a, h, oh, a.scale_h), tw = taps(a, w, ow, a.scale_w);
  dispatch_float(x.dtype(), "resize", [&]<typename T>() {
    using C = compute_t<T>;
    const T* xp = x.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (worth_parallel(out.numel()) && planes * oh > 1)
    for (int64_t r = 0; r < planes * oh; ++r) {
      const int64_t p = r / oh, y = r % oh;
      const T* top = xp + (p * h + th.lo[y]) * w;
      const T* bottom = xp + (p * h + th.hi[y]) * w;
      const auto wy = static_cast<C>(th.w[y]);
      T* row = op + r * ow;
      for (int64_t c = 0; c < ow; ++c) {
        if (!a.linear) {
          row[c] = top[tw.lo[c]];
          continue;
        }
        const auto wx = static_cast<C>(tw.w[c]);
        const C t = (1 - wx) * static_cast<C>(top[tw.lo[c]]) + wx * static_cast<C>(top[tw.hi[c]]);
        const C b =
            (1 - wx) * static_cast<C>(bottom[tw.lo[c]]) + wx * static_cast<C>(bottom[tw.hi[c]]);
        row[c] = static_cast<T>((1 - wy) * t + wy * b);
      }
    }
  });
  return out;
}

// Nearest copies; linear blends four neighbours per result (three lerps of two FLOPs each).
OpCost resize_cost(std::span<const TensorType> in, const TensorType& out, const Attrs& attrs) {
  const bool linear = attrs.get_string_or("mode", "nearest") == "linear";
  return streaming_cost(in, out, linear ? 6 * static_cast<double>(out.numel()) : 0);
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add({{"resize",
          1,
          1,
          {{"sizes", AttrKind::kInts, true},
           {"mode", AttrKind::kString, false},
           {"coordinate_transformation_mode", AttrKind::kString, false},
           {"nearest_mode", AttrKind::kString, false},
           {"scale_h", AttrKind::kFloat, false},
           {"scale_w", AttrKind::kFloat, false}}},
         resize_rule,
         resize_kernel,
         resize_cost});
}

}  // namespace crucible::vision
