// Registration entry points of the built-in op families; each family lives in its own file.
#pragma once

#include "crucible/ir/op_registry.h"

namespace crucible {

void register_builtin_ops(OpRegistry& r);

void register_elementwise_ops(
    OpRegistry& r);  // unary math and activations, binary arithmetic, compare, where, cast, clamp
void register_shape_ops(OpRegistry& r);  // reshape, permute, transpose, expand, slice, cat,
                                         // squeeze, unsqueeze, full, arange
void register_reduction_ops(
    OpRegistry& r);  // sum, prod, mean, amax, amin, var, softmax, log_softmax, layer_norm
void register_linalg_ops(OpRegistry& r);     // matmul, linear, addmm, embedding
void register_vision_ops(OpRegistry& r);     // conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d,
                                             // batch_norm, conv_transpose2d, resize
void register_gather_ops(OpRegistry& r);     // gather, gather_elements
void register_along_dim_ops(OpRegistry& r);  // argmax, argmin, cumsum, topk, topk_indices
void register_position_ops(OpRegistry& r);   // pad, trilu

}  // namespace crucible
