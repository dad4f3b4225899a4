// conv2d in f32 through oneDNN's convolution primitive (placeholder until the kernel lands).
#include "crucible/core/error.h"
#include "ops/vision_internal.h"

namespace crucible::vision {

void conv2d_f32(const ConvShape&, const float*, const float*, const float*, float*) {
  throw Error("conv2d: the f32 kernel is not implemented yet");
}

}  // namespace crucible::vision
