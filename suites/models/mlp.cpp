// A plain 4-layer MLP (Linear-ReLU x3, Linear) with PyTorch's default nn.Linear init: the simplest
// GEMM-bound workload, where a backend's speed-up can only come from the GEMMs and their epilogues.
#include "models.h"

namespace crucible::models {

Graph build_mlp(const BuildOptions& o) {
  const bool full = o.variant == Variant::kFull;
  const std::vector<int64_t> dims = full ? std::vector<int64_t>{1024, 4096, 4096, 4096, 1000}
                                         : std::vector<int64_t>{64, 128, 128, 128, 10};
  NetBuilder b("mlp");
  ValueId x = b.input("x", DType::kF32, {o.batch_size, dims.front()});
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    x = b.linear(x, dims[i], dims[i + 1], true, 0.0, "layers." + std::to_string(2 * i));
    if (i + 2 < dims.size()) x = b.relu(x);
  }
  return b.finish({x});
}

}  // namespace crucible::models
