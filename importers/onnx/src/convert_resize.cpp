// ONNX's Resize (opsets 10, 11, 13) and Upsample (7, 9) onto the registry's `resize`, which
// resizes H and W of an NCHW tensor: an input of another rank is viewed as [1, leading, H, W]
// when its leading dims keep their size. Scales and sizes must be constant.
#include <fmt/format.h>

#include <cmath>

#include "converters.h"

namespace crucible::onnx {

namespace {

// What a node asks of `resize`, in ONNX's terms (one scale per dim of the input).
struct Request {
  std::string mode = "nearest", coord = "half_pixel", rounding = "round_prefer_floor";
  std::vector<double> scales;  // empty when the output sizes were given instead
  std::vector<int64_t> sizes;  // the output shape
};

void emit_resize(Ctx& c, const NodeProto& n, const Val& x, const Request& r) {
  if (r.mode == "cubic") unsupported("Resize mode cubic");
  if (r.mode != "nearest" && r.mode != "linear")
    malformed(fmt::format("mode '{}' is not nearest, linear or cubic", r.mode));
  if (r.coord == "tf_crop_and_resize") unsupported("Resize with tf_crop_and_resize");
  const int64_t rank = x.rank();
  const Shape& in = x.type.shape;
  if (rank < 1) malformed("Resize needs an input of rank >= 1");
  if (static_cast<int64_t>(r.sizes.size()) != rank)
    malformed(fmt::format("{} output dims for an input of rank {}", r.sizes.size(), rank));
  // Dims before the last two must keep their size (and, with a scale, be 1 or scaled by 1).
  int64_t lead = 1;
  for (int64_t d = 0; d + 2 < rank; ++d) {
    const bool kept = r.sizes[d] == in[d] && (r.scales.empty() || r.scales[d] == 1.0 || in[d] <= 1);
    if (!kept) unsupported(fmt::format("Resize of dim {} (only the last two dims resize)", d));
    lead *= in[d];
  }
  const int64_t h = rank >= 2 ? in[rank - 2] : 1, w = in[rank - 1];
  const int64_t oh = rank >= 2 ? r.sizes[rank - 2] : 1, ow = r.sizes[rank - 1];
  Attrs attrs{{"sizes", std::vector<int64_t>{1, lead, oh, ow}},
              {"mode", r.mode},
              {"coordinate_transformation_mode", r.coord},
              {"nearest_mode", r.rounding}};
  if (!r.scales.empty()) {
    if (rank >= 2) attrs.set("scale_h", r.scales[rank - 2]);
    attrs.set("scale_w", r.scales[rank - 1]);
  }
  if (rank == 4) {
    attrs.set("sizes", std::vector<int64_t>{in[0], in[1], oh, ow});
    return c.out(n, 0, c.op("resize", {x}, attrs));
  }
  Val x4 = c.op("reshape", {x}, {{"shape", std::vector<int64_t>{1, lead, h, w}}});
  c.out(n, 0, c.op("reshape", {c.op("resize", {x4}, attrs)}, {{"shape", r.sizes}}));
}

// The scales tensor as doubles; empty when the input is absent or holds no element.
std::vector<double> const_floats(Ctx& c, const NodeProto& n, int i) {
  if (!c.present(n, i)) return {};
  const Val v = c.in(n, i);
  if (!v.value().defined())
    unsupported(
        fmt::format("input {} ('{}') is computed at run time; only constant scales are "
                    "supported",
                    i, n.input(i)));
  std::vector<double> r;
  for (int64_t k = 0; k < v.value().numel(); ++k) r.push_back(v.value().get(k));
  return r;
}

// The output shape ONNX derives from scales: floor(in * scale) per dim.
std::vector<int64_t> scaled_sizes(const Val& x, const std::vector<double>& scales) {
  if (static_cast<int64_t>(scales.size()) != x.rank())
    malformed(fmt::format("{} scales for an input of rank {}", scales.size(), x.rank()));
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!(scales[d] > 0)) malformed(fmt::format("scale {} must be positive", scales[d]));
    sizes.push_back(
        static_cast<int64_t>(std::floor(static_cast<double>(x.type.shape[d]) * scales[d])));
  }
  return sizes;
}

void resize(Ctx& c, const NodeProto& n) {
  const Val x = c.in(n, 0);
  Request r;
  r.mode = attr_string(n, "mode", "nearest");
  if (c.opset() < 11) {
    // Resize-10 is Upsample-9 renamed: x / scale, rounded down.
    r.coord = "asymmetric";
    r.rounding = "floor";
    r.scales = const_floats(c, n, 1);
    r.sizes = scaled_sizes(x, r.scales);
    return emit_resize(c, n, x, r);
  }
  r.coord = attr_string(n, "coordinate_transformation_mode", "half_pixel");
  r.rounding = attr_string(n, "nearest_mode", "round_prefer_floor");
  r.scales = const_floats(c, n, 2);
  if (!r.scales.empty()) {
    r.sizes = scaled_sizes(x, r.scales);
  } else if (c.present(n, 3)) {
    r.sizes = c.const_ints(n, 3);
  } else {
    malformed("Resize needs scales or sizes");
  }
  emit_resize(c, n, x, r);
}

void upsample(Ctx& c, const NodeProto& n) {
  const Val x = c.in(n, 0);
  Request r;
  r.mode = attr_string(n, "mode", "nearest");
  if (r.mode == "bilinear") r.mode = "linear";
  r.coord = "asymmetric";
  r.rounding = "floor";
  if (c.opset() >= 9) {
    r.scales = const_floats(c, n, 1);
  } else if (auto s = attr_floats(n, "scales")) {
    r.scales = *s;
  } else {
    malformed("Upsample needs scales");
  }
  r.sizes = scaled_sizes(x, r.scales);
  emit_resize(c, n, x, r);
}

}  // namespace

void add_resize_converters(ConverterTable& t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
}

}  // namespace crucible::onnx
