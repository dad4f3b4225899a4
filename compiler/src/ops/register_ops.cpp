// Registers every built-in op family into a registry.
#include "ops/register_ops.h"

namespace crucible {

void register_builtin_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_shape_ops(r);
  register_reduction_ops(r);
  register_linalg_ops(r);
  register_vision_ops(r);
}

}  // namespace crucible
