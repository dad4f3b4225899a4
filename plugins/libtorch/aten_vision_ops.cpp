// ATen entries of the vision ops added for ONNX import: conv_transpose2d (torch's own op) and
// resize, as torch's upsample ops where they compute what ONNX's Resize does. The rest of Resize's
// modes have no equal in torch and are refused at compile time, naming the mode.
#include <fmt/format.h>

#include <optional>

#include "aten_bridge.h"
#include "aten_entry.h"
#include "crucible/plugin_api.h"

namespace crucible::libtorch::aten {

namespace {

using Tensors = std::vector<at::Tensor>;
using Names = std::vector<std::string>;

Entry conv_transpose2d() {
  auto ints = [](const Ctx& c) {
    return std::vector<std::vector<int64_t>>{pair(c.a(), "stride", 1), pair(c.a(), "padding", 0),
                                             pair(c.a(), "output_padding", 0),
                                             pair(c.a(), "dilation", 1)};
  };
  // bf16 runs in f32, rounded once, as crucible's kernel does: torch 1.13's CPU bf16 transposed
  // convolution refuses a kernel larger than its input ("Kernel size can't be greater than
  // actual input size"), a check that belongs to the forward convolution.
  return {[ints](const Ctx& c, const Tensors& x) {
            const auto v = ints(c);
            const DType t = c.out == DType::kBF16 ? DType::kF32 : c.out;
            const at::Tensor y = at::conv_transpose2d(
                as(x[0], t), as(x[1], t),
                x.size() > 2 ? c10::optional<at::Tensor>(as(x[2], t)) : c10::nullopt, v[0], v[1],
                v[2], c.a().get_int_or("groups", 1), v[3]);
            return as(y, c.out);
          },
          [ints](const Ctx& c, const Names& x) {
            const auto v = ints(c);
            const DType t = c.out == DType::kBF16 ? DType::kF32 : c.out;
            const std::string y = fmt::format(
                "torch.conv_transpose2d({}, {}, {}, {}, {}, {}, {}, {})", sas(c, 0, x[0], t),
                sas(c, 1, x[1], t), x.size() > 2 ? sas(c, 2, x[2], t) : "None", sints(v[0]),
                sints(v[1]), sints(v[2]), c.a().get_int_or("groups", 1), sints(v[3]));
            return t == c.out ? y : fmt::format("{}.to({})", y, sdtype(c.out));
          }};
}

// The torch upsample op that computes a resize node, by ONNX's formulas:
// - nearest, asymmetric, floor: floor(x / scale), torch's `nearest`;
// - nearest, half_pixel + round_prefer_ceil or tf_half_pixel_for_nn + floor: floor((x + 0.5) /
//   scale), torch's `nearest-exact`;
// - linear, align_corners: x * (in - 1) / (out - 1) when ONNX's out (scale * in) is the output
//   size, torch's bilinear with align_corners;
// - linear, half_pixel (or pytorch_half_pixel where no resized dim becomes 1): (x + 0.5) / scale
//   - 0.5 clamped at 0, torch's bilinear without align_corners.
enum class Upsample { kNearest, kNearestExact, kBilinearAlignCorners, kBilinear };

struct Plan {
  Upsample op;
  std::vector<int64_t> size;  // [OH, OW]
  std::optional<double> scale_h, scale_w;
};

std::optional<Plan> plan(const Ctx& c) {
  const Attrs& a = c.a();
  const std::string mode = a.get_string_or("mode", "nearest");
  const std::string coord = a.get_string_or("coordinate_transformation_mode", "half_pixel");
  const std::string rounding = a.get_string_or("nearest_mode", "round_prefer_floor");
  const std::vector<int64_t>& sizes = a.get_ints("sizes");
  const Shape& in = c.shape(0);
  Plan p{Upsample::kNearest,
         {sizes[2], sizes[3]},
         a.get_optional_float("scale_h"),
         a.get_optional_float("scale_w")};
  if (mode == "nearest") {
    if (coord == "asymmetric" && rounding == "floor") return p;
    if ((coord == "half_pixel" && rounding == "round_prefer_ceil") ||
        (coord == "tf_half_pixel_for_nn" && rounding == "floor")) {
      p.op = Upsample::kNearestExact;
      return p;
    }
    return std::nullopt;
  }
  if (coord == "align_corners") {
    auto exact = [&](const std::optional<double>& s, int d) {
      return !s || *s * static_cast<double>(in[d]) == static_cast<double>(sizes[d]);
    };
    if (!exact(p.scale_h, 2) || !exact(p.scale_w, 3)) return std::nullopt;
    p.op = Upsample::kBilinearAlignCorners;
    p.scale_h = p.scale_w = std::nullopt;
    return p;
  }
  const bool to_one = (sizes[2] == 1 && in[2] > 1) || (sizes[3] == 1 && in[3] > 1);
  if (coord == "half_pixel" || (coord == "pytorch_half_pixel" && !to_one)) {
    p.op = Upsample::kBilinear;
    return p;
  }
  return std::nullopt;
}

Entry resize() {
  auto opt = [](const std::optional<double>& s) {
    return s ? c10::optional<double>(*s) : c10::nullopt;
  };
  auto sopt = [](const std::optional<double>& s) { return s ? sfloat(*s) : std::string("None"); };
  return {[opt](const Ctx& c, const Tensors& x) {
            const Plan p = *plan(c);
            switch (p.op) {
              case Upsample::kNearest:
                return at::upsample_nearest2d(x[0], p.size, opt(p.scale_h), opt(p.scale_w));
              case Upsample::kNearestExact:
                return at::_upsample_nearest_exact2d(x[0], p.size, opt(p.scale_h), opt(p.scale_w));
              case Upsample::kBilinearAlignCorners:
                return at::upsample_bilinear2d(x[0], p.size, true);
              case Upsample::kBilinear:
                break;
            }
            return at::upsample_bilinear2d(x[0], p.size, false, opt(p.scale_h), opt(p.scale_w));
          },
          [sopt](const Ctx& c, const Names& x) {
            const Plan p = *plan(c);
            const std::string scales = sopt(p.scale_h) + ", " + sopt(p.scale_w);
            switch (p.op) {
              case Upsample::kNearest:
                return fmt::format("torch.upsample_nearest2d({}, {}, {})", x[0], sints(p.size),
                                   scales);
              case Upsample::kNearestExact:
                return fmt::format("torch._upsample_nearest_exact2d({}, {}, {})", x[0],
                                   sints(p.size), scales);
              case Upsample::kBilinearAlignCorners:
                return fmt::format("torch.upsample_bilinear2d({}, {}, True, None, None)", x[0],
                                   sints(p.size));
              case Upsample::kBilinear:
                break;
            }
            return fmt::format("torch.upsample_bilinear2d({}, {}, False, {})", x[0], sints(p.size),
                               scales);
          },
          [](const Ctx& c) {
            const Shape& in = c.shape(0);
            const std::vector<int64_t>& sizes = c.a().get_ints("sizes");
            if (in[1] == 0 || in[2] == 0 || in[3] == 0 || sizes[2] == 0 || sizes[3] == 0) {
              throw plugin::CompileError(fmt::format(
                  "libtorch: resize of {} to {}: torch's upsample ops need non-empty C, H and W",
                  shape_str(in), shape_str(sizes)));
            }
            if (plan(c)) return;
            const Attrs& a = c.a();
            throw plugin::CompileError(fmt::format(
                "libtorch: resize mode={} coordinate_transformation_mode={}{} has no equal among "
                "torch's upsample ops",
                a.get_string_or("mode", "nearest"),
                a.get_string_or("coordinate_transformation_mode", "half_pixel"),
                a.get_string_or("mode", "nearest") == "nearest"
                    ? " nearest_mode=" + a.get_string_or("nearest_mode", "round_prefer_floor")
                    : ""));
          }};
}

}  // namespace

void add_vision_entries(Table& m) {
  m["conv_transpose2d"] = conv_transpose2d();
  m["resize"] = resize();
}

}  // namespace crucible::libtorch::aten
