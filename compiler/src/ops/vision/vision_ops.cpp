// The vision op family's entry point: conv2d, the 2-D pools, batch_norm, conv_transpose2d and
// resize, each in its own file.
// Their shared window geometry lives in window_geometry.cpp.
#include "register_ops.h"
#include "vision/vision_internal.h"

namespace crucible {

void register_vision_ops(OpRegistry& r) {
  vision::register_conv_ops(r);
  vision::register_pool_ops(r);
  vision::register_batch_norm_ops(r);
  vision::register_conv_transpose_ops(r);
  vision::register_resize_ops(r);
}

}  // namespace crucible
