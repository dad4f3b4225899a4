// The elementwise op family's entry point: registers the unary, binary and compare/where parts
// (their own files) and cast, the dtype conversion every other part can express itself through.
#include "crucible/core/error.h"
#include "elementwise/elementwise_internal.h"
#include "elementwise/elementwise_loop.h"
#include "register_ops.h"

namespace crucible {
namespace {

OpDef cast_def() {
  OpDef d;
  d.schema = {"cast", 1, 1, {{"dtype", AttrKind::kDType, true}}};
  d.infer = [](std::span<const TensorType> in, const Attrs& attrs) -> TensorType {
    return {attrs.get_dtype("dtype"), in[0].shape};
  };
  d.kernel = [](std::span<const Tensor> in, const Attrs& attrs) {
    const DType dtype = attrs.get_dtype("dtype");
    // Same dtype: the operand itself, as torch's .to() does (kernel results may alias operands).
    return in[0].dtype() == dtype ? in[0] : in[0].to(dtype);
  };
  d.cost = movement_cost;
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  ew::register_unary_ops(r);
  ew::register_binary_ops(r);
  ew::register_compare_ops(r);
  r.add(cast_def());
}

}  // namespace crucible
