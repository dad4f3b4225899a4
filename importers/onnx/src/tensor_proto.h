// ONNX TensorProto <-> crucible Tensor: dtype mapping, the typed and raw data fields, external
// data (kept inside the model's folder), and size checks made before anything is allocated.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "crucible/core/tensor.h"
#include "onnx/onnx_pb.h"

namespace crucible::onnx {

// The crucible dtype of an ONNX element type, or nullopt (float16, int8, string, ...).
std::optional<DType> dtype_of(int32_t onnx_elem_type);
// "float16", "int8", ... for messages.
std::string onnx_type_name(int32_t onnx_elem_type);

// Converts `t` (what = how messages name it: "initializer 'w'"). External data is read from
// `base_dir`, and its location must resolve inside it. Throws ImportError.
Tensor tensor_from_proto(const ::onnx::TensorProto& t, const std::filesystem::path& base_dir,
                         const std::string& what);

// Frees the proto's data fields once converted, so a large model never holds two copies.
void release_data(::onnx::TensorProto& t);

// Shape product with an overflow and 2^40-element check; throws ImportError naming `what`.
int64_t checked_numel(const Shape& shape, const std::string& what);

}  // namespace crucible::onnx
