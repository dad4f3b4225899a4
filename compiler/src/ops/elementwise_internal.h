// Internal seams of the elementwise op family: each file registers its part, and the type-rule helpers
// they share (bool checks, broadcast result types) live here.
#pragma once

#include <span>

#include "crucible/ir/op_registry.h"

namespace crucible::ew {

void register_unary_ops(OpRegistry& r);    // neg, abs, relu, exp ... gelu, clamp
void register_binary_ops(OpRegistry& r);   // add, sub, mul, div, maximum, minimum, pow
void register_compare_ops(OpRegistry& r);  // eq, ne, lt, le, gt, ge, where

// Throws Error "not supported for bool" when `t` is bool (ops that PyTorch does not define on bool).
void reject_bool(DType t);

}  // namespace crucible::ew
