// ResNet-18 and ResNet-50 as torchvision defines them (BasicBlock / Bottleneck v1.5 with the stride
// on the 3x3 conv), inference-mode batch norm; the small variants are one block per stage, 1/4
// width.
#include "models.h"

namespace crucible::models {

namespace {

struct ResNetConfig {
  bool bottleneck;
  std::vector<int64_t> blocks;
  int64_t base_width, classes, image;
};

ValueId conv_bn(NetBuilder& b, ValueId x, int64_t in, int64_t out, int64_t k, int64_t stride,
                const std::string& conv, const std::string& bn) {
  return b.batch_norm(b.conv2d(x, in, out, k, stride, k / 2, 1, false, conv), out, bn);
}

ValueId basic_block(NetBuilder& b, ValueId x, int64_t in, int64_t planes, int64_t stride) {
  ValueId out = b.relu(conv_bn(b, x, in, planes, 3, stride, "conv1", "bn1"));
  out = conv_bn(b, out, planes, planes, 3, 1, "conv2", "bn2");
  ValueId identity = x;
  if (stride != 1 || in != planes)
    identity = conv_bn(b, x, in, planes, 1, stride, "downsample.0", "downsample.1");
  return b.relu(b.add(out, identity));
}

ValueId bottleneck_block(NetBuilder& b, ValueId x, int64_t in, int64_t planes, int64_t stride) {
  const int64_t out_ch = planes * 4;
  ValueId out = b.relu(conv_bn(b, x, in, planes, 1, 1, "conv1", "bn1"));
  out = b.relu(conv_bn(b, out, planes, planes, 3, stride, "conv2", "bn2"));
  out = conv_bn(b, out, planes, out_ch, 1, 1, "conv3", "bn3");
  ValueId identity = x;
  if (stride != 1 || in != out_ch)
    identity = conv_bn(b, x, in, out_ch, 1, stride, "downsample.0", "downsample.1");
  return b.relu(b.add(out, identity));
}

Graph build_resnet(const std::string& name, const ResNetConfig& c, int64_t batch) {
  NetBuilder b(name);
  ValueId x = b.input("x", DType::kF32, {batch, 3, c.image, c.image});
  const int64_t w = c.base_width;
  x = b.relu(conv_bn(b, x, 3, w, 7, 2, "conv1", "bn1"));
  x = b.op("max_pool2d", {x},
           {{"kernel_size", std::vector<int64_t>{3, 3}},
            {"stride", std::vector<int64_t>{2, 2}},
            {"padding", std::vector<int64_t>{1, 1}}},
           "maxpool");
  int64_t in = w;
  for (size_t stage = 0; stage < c.blocks.size(); ++stage) {
    const int64_t planes = w << stage;
    for (int64_t i = 0; i < c.blocks[stage]; ++i) {
      auto s = b.scope("layer" + std::to_string(stage + 1) + "." + std::to_string(i));
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      x = c.bottleneck ? bottleneck_block(b, x, in, planes, stride)
                       : basic_block(b, x, in, planes, stride);
      in = c.bottleneck ? planes * 4 : planes;
    }
  }
  x = b.op("adaptive_avg_pool2d", {x}, {{"output_size", std::vector<int64_t>{1, 1}}}, "avgpool");
  x = b.reshape(x, {batch, in});
  return b.finish({b.linear(x, in, c.classes, true, 0.0, "fc")});
}

}  // namespace

Graph build_resnet18(const BuildOptions& o) {
  ResNetConfig c = o.variant == Variant::kFull ? ResNetConfig{false, {2, 2, 2, 2}, 64, 1000, 224}
                                               : ResNetConfig{false, {1, 1, 1, 1}, 16, 10, 32};
  c.image = o.image_side(c.image);
  return build_resnet("resnet18", c, o.batch_size);
}

Graph build_resnet50(const BuildOptions& o) {
  ResNetConfig c = o.variant == Variant::kFull ? ResNetConfig{true, {3, 4, 6, 3}, 64, 1000, 224}
                                               : ResNetConfig{true, {1, 1, 1, 1}, 16, 10, 32};
  c.image = o.image_side(c.image);
  return build_resnet("resnet50", c, o.batch_size);
}

}  // namespace crucible::models
