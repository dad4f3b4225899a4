// The converter table and convert_node, which picks a node's converter or ONNX's function body.
#include "converters.h"

#include <fmt/format.h>

namespace crucible::onnx {

bool inline_function(Ctx& c, const NodeProto& n);  // function_inline.cpp

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_math_converters(t);
    add_shape_converters(t);
    add_nn_converters(t);
    add_reduce_converters(t);
    add_einsum_converter(t);
    add_resize_converters(t);
    return t;
  }();
  return table;
}

void convert_node(Ctx& c, const NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    unsupported(fmt::format("domain '{}' not supported", n.domain()));
  // Every ONNX op has an output (output 0 may be unnamed when optional), and converters read it.
  if (n.output_size() == 0) malformed("a node without outputs");
  const auto& table = converters();
  if (auto it = table.find(n.op_type()); it != table.end()) return it->second(c, n);
  if (inline_function(c, n)) return;
  unsupported("not supported");
}

}  // namespace crucible::onnx
