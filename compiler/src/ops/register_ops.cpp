// Registers every built-in op family into a registry, and into the global one when the ops
// library is loaded.
#include "register_ops.h"

namespace crucible {

void register_builtin_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_shape_ops(r);
  register_reduction_ops(r);
  register_linalg_ops(r);
  register_vision_ops(r);
  register_gather_ops(r);
  register_along_dim_ops(r);
  register_position_ops(r);
}

// Loading this library installs the built-in ops into OpRegistry::global().
const OpLibrary kBuiltinOps{register_builtin_ops};

}  // namespace crucible
