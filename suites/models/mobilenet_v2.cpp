// MobileNetV2 as torchvision defines it: inverted residual blocks (1x1 expand, 3x3 depthwise,
// 1x1 linear projection) with ReLU6; the small variant is width 0.25 with one block per stage.
#include <algorithm>

#include "models.h"

namespace crucible::models {

namespace {

// torchvision's _make_divisible: round channels to a multiple of 8, never down by more than 10%.
int64_t make_divisible(double v, int64_t divisor = 8) {
  int64_t n =
      std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(n) < 0.9 * v) n += divisor;
  return n;
}

ValueId relu6(NetBuilder& b, ValueId x) { return b.op("clamp", {x}, {{"min", 0.0}, {"max", 6.0}}); }

// Conv2dNormActivation: conv (no bias) + batch norm + ReLU6, named <scope>.0 and <scope>.1.
ValueId conv_bn_relu6(NetBuilder& b, ValueId x, int64_t in, int64_t out, int64_t k, int64_t stride,
                      int64_t groups) {
  return relu6(b,
               b.batch_norm(b.conv2d(x, in, out, k, stride, k / 2, groups, false, "0"), out, "1"));
}

}  // namespace

Graph build_mobilenet_v2(const BuildOptions& o) {
  const bool full = o.variant == Variant::kFull;
  const double width = full ? 1.0 : 0.25;
  const int64_t image = o.image_side(full ? 224 : 32), classes = full ? 1000 : 10,
                batch = o.batch_size;
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  NetBuilder b("mobilenet_v2");
  ValueId x = b.input("x", DType::kF32, {batch, 3, image, image});
  int64_t in = make_divisible(32 * width);
  const int64_t last =
      full ? make_divisible(1280 * std::max(1.0, width)) : make_divisible(1280 * width);
  int64_t feature = 0;
  {
    auto f = b.scope("features");
    {
      auto s = b.scope(feature++);
      x = conv_bn_relu6(b, x, 3, in, 3, 2, 1);
    }
    for (const Stage& st : stages) {
      const int64_t out = make_divisible(st.c * width), repeats = full ? st.n : 1;
      for (int64_t i = 0; i < repeats; ++i) {
        auto s = b.scope(feature++);
        auto conv = b.scope("conv");
        const int64_t stride = i == 0 ? st.s : 1, hidden = in * st.t;
        ValueId y = x;
        int64_t layer = 0;
        if (st.t != 1) {
          auto e = b.scope(layer++);
          y = conv_bn_relu6(b, y, in, hidden, 1, 1, 1);
        }
        {
          auto d = b.scope(layer++);
          y = conv_bn_relu6(b, y, hidden, hidden, 3, stride, hidden);
        }
        // The projection back to `out` channels is linear: conv + batch norm, no activation.
        const std::string proj = std::to_string(layer);
        y = b.batch_norm(b.conv2d(y, hidden, out, 1, 1, 0, 1, false, proj), out,
                         std::to_string(layer + 1));
        x = stride == 1 && in == out ? b.add(x, y) : y;
        in = out;
      }
    }
    auto s = b.scope(feature++);
    x = conv_bn_relu6(b, x, in, last, 1, 1, 1);
  }
  x = b.op("adaptive_avg_pool2d", {x}, {{"output_size", std::vector<int64_t>{1, 1}}});
  x = b.reshape(x, {batch, last});
  // torchvision initialises the classifier with N(0, 0.01) weights and zero bias.
  return b.finish({b.linear(x, last, classes, true, 0.01, "classifier.1")});
}

}  // namespace crucible::models
