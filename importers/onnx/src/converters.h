// The converter table: one function per ONNX op type that emits crucible nodes for it. Families
// live one per file (math, shape, nn, reduce, einsum, resize); an op found nowhere falls back to
// the body ONNX's own schema defines for it (function_inline.cpp).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include "import_context.h"

namespace crucible::onnx {

using Converter = std::function<void(Ctx&, const NodeProto&)>;
using ConverterTable = std::unordered_map<std::string, Converter>;

// Every converter of the default domain, keyed by op type.
const ConverterTable& converters();

void add_math_converters(ConverterTable& t);    // convert_math.cpp
void add_shape_converters(ConverterTable& t);   // convert_shape.cpp
void add_nn_converters(ConverterTable& t);      // convert_nn.cpp
void add_reduce_converters(ConverterTable& t);  // convert_reduce.cpp
void add_einsum_converter(ConverterTable& t);   // convert_einsum.cpp
void add_resize_converters(ConverterTable& t);  // convert_resize.cpp

// Converts one node: its converter, else ONNX's function body for the op at the model's opset.
// Throws ImportError naming the node and op.
void convert_node(Ctx& ctx, const NodeProto& n);

}  // namespace crucible::onnx
