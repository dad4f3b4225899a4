// Type-rule building blocks shared by the op families: PyTorch's result-type promotion,
// broadcasting, and reduced shapes.
#pragma once

#include <span>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible {

// torch.result_type over tensor operands: dimensioned tensors decide the category and width; 0-d
// tensors only raise the category (an f32 0-d with a u8 tensor gives f32, an i64 0-d gives u8).
DType result_type(std::span<const TensorType> operands);
// Broadcast shape of all operands (throws Error naming the shapes).
Shape broadcast_all(std::span<const TensorType> operands);
// The shape after reducing `dims` (empty: all dims), keeping size-1 dims when keepdim. Dims may be
// negative; repeats are an Error.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
// Normalised, sorted reduction dims (empty input means every dim).
std::vector<int64_t> reduction_dims(const Shape& shape, const std::vector<int64_t>& dims);

}  // namespace crucible
