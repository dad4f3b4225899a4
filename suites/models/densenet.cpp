// DenseNet-121 as torchvision defines it (growth 32, blocks 6-12-24-16, bottleneck 4x, compression
// 0.5): each dense layer is BN-ReLU-1x1 conv, BN-ReLU-3x3 conv on the concatenation of all earlier
// features. The torch.compile tutorial's model; the small variant has growth 8 and 2 layers a
// block.
#include "models.h"

namespace crucible::models {

Graph build_densenet121(const BuildOptions& o) {
  constexpr auto kFanIn = NetBuilder::Fan::kIn;  // torchvision's kaiming_normal_ default
  const bool full = o.variant == Variant::kFull;
  const int64_t growth = full ? 32 : 8, init = full ? 64 : 16, bn_size = 4;
  const std::vector<int64_t> blocks =
      full ? std::vector<int64_t>{6, 12, 24, 16} : std::vector<int64_t>{2, 2, 2, 2};
  const int64_t image = o.image_side(full ? 224 : 32), classes = full ? 1000 : 10,
                batch = o.batch_size;
  NetBuilder b("densenet121");
  ValueId x = b.input("x", DType::kF32, {batch, 3, image, image});
  int64_t features = init;
  {
    auto f = b.scope("features");
    x = b.relu(
        b.batch_norm(b.conv2d(x, 3, init, 7, 2, 3, 1, false, "conv0", kFanIn), init, "norm0"));
    x = b.op("max_pool2d", {x},
             {{"kernel_size", std::vector<int64_t>{3, 3}},
              {"stride", std::vector<int64_t>{2, 2}},
              {"padding", std::vector<int64_t>{1, 1}}},
             "pool0");
    for (size_t blk = 0; blk < blocks.size(); ++blk) {
      std::vector<ValueId> parts{x};
      {
        auto s = b.scope("denseblock" + std::to_string(blk + 1));
        for (int64_t l = 0; l < blocks[blk]; ++l) {
          auto layer = b.scope("denselayer" + std::to_string(l + 1));
          const int64_t in = features + l * growth;
          ValueId cat = parts.size() == 1 ? parts[0] : b.cat(parts, 1);
          ValueId y = b.relu(b.batch_norm(cat, in, "norm1"));
          y = b.conv2d(y, in, bn_size * growth, 1, 1, 0, 1, false, "conv1", kFanIn);
          y = b.relu(b.batch_norm(y, bn_size * growth, "norm2"));
          parts.push_back(
              b.conv2d(y, bn_size * growth, growth, 3, 1, 1, 1, false, "conv2", kFanIn));
        }
      }
      x = b.cat(parts, 1);
      features += blocks[blk] * growth;
      if (blk + 1 < blocks.size()) {
        auto s = b.scope("transition" + std::to_string(blk + 1));
        x = b.relu(b.batch_norm(x, features, "norm"));
        x = b.conv2d(x, features, features / 2, 1, 1, 0, 1, false, "conv", kFanIn);
        x = b.op(
            "avg_pool2d", {x},
            {{"kernel_size", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}},
            "pool");
        features /= 2;
      }
    }
    x = b.batch_norm(x, features, "norm5");
  }
  x = b.op("adaptive_avg_pool2d", {b.relu(x)}, {{"output_size", std::vector<int64_t>{1, 1}}});
  x = b.reshape(x, {batch, features});
  return b.finish({b.linear(x, features, classes, true, 0.0, "classifier")});
}

}  // namespace crucible::models
