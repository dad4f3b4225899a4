// Internal seams of the elementwise op family: the registration function of each of its files,
// and the type-rule helper they share.
#pragma once

#include <span>

#include "crucible/ir/op_registry.h"

namespace crucible::ew {

void register_unary_ops(OpRegistry& r);    // neg, abs, relu, exp ... gelu, clamp, silu, floor ...
void register_binary_ops(OpRegistry& r);   // add, sub, mul, div, maximum, minimum, pow, mod
void register_compare_ops(OpRegistry& r);  // eq, ne, lt, le, gt, ge, where, logical_and/or/xor

// Throws Error "not supported for bool" when `t` is bool (ops that PyTorch does not define on
// bool).
void reject_bool(DType t);

}  // namespace crucible::ew
