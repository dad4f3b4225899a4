// pad (constant, reflect, edge, negative pads), trilu and the prod reduction: hand values, every
// dtype, NaN/inf, size-0 dims, non-contiguous operands, and the rules' errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Attrs Pads(std::vector<int64_t> pads, std::string mode = "constant") {
  return {{"pads", pads}, {"mode", mode}};
}

TEST(PositionOps, PadConstantReflectEdge) {
  for (DType t : kAllDTypes) {
    const Tensor x = T(t, {2, 2}, {1, 0, 1, 1});
    ExpectTensor(RunOp("pad", {x}, Pads({0, 1, 1, 0})), t, {3, 3}, {0, 1, 0, 0, 1, 1, 0, 0, 0});
    ExpectTensor(RunOp("pad", {x}, Pads({1, 1, 0, 0}, "edge")), t, {3, 3},
                 {1, 1, 0, 1, 1, 0, 1, 1, 1});
  }
  const Tensor x = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, kNaN});
  // ONNX's reflect example along the last dim: mirror without the edge element.
  ExpectTensor(RunOp("pad", {x}, Pads({0, 2, 0, 1}, "reflect")), DType::kF32, {2, 6},
               {3, 2, 1, 2, 3, 2, kNaN, 5, 4, 5, kNaN, 5});
  Attrs with_value = Pads({1, 0, 0, 0});
  with_value.set("value", 2.5);
  ExpectTensor(RunOp("pad", {x}, with_value), DType::kF32, {3, 3},
               {2.5, 2.5, 2.5, 1, 2, 3, 4, 5, kNaN});
  // The value converted as cast converts it: truncated for integers, nonzero for bool.
  ExpectTensor(RunOp("pad", {T(DType::kI32, {1}, {9})},
                     Attrs{{"pads", std::vector<int64_t>{1, 0}}, {"value", -1.7}}),
               DType::kI32, {2}, {-1, 9});
  ExpectTensor(RunOp("pad", {T(DType::kBool, {1}, {0})},
                     Attrs{{"pads", std::vector<int64_t>{0, 1}}, {"value", kInf}}),
               DType::kBool, {2}, {0, 1});
  // Negative pads crop; then the other side pads what is left.
  ExpectTensor(RunOp("pad", {x}, Pads({0, -1, 0, 1}, "edge")), DType::kF32, {2, 3},
               {2, 3, 3, 5, kNaN, kNaN});
  ExpectTensor(RunOp("pad", {x}, Pads({-1, 0, 0, 0})), DType::kF32, {1, 3}, {4, 5, kNaN});
  ExpectTensor(RunOp("pad", {x}, Pads({0, 0, 0, -3})), DType::kF32, {2, 0}, {});
  // Non-contiguous x: transposed, [3,2] = 1 4 / 2 5 / 3 NaN.
  ExpectTensor(RunOp("pad", {x.transpose(0, 1)}, Pads({1, 0, 0, 0}, "reflect")), DType::kF32,
               {4, 2}, {2, 5, 1, 4, 2, 5, 3, kNaN});
  // Size 0: constant padding of an empty dim; 0-d with no pads.
  ExpectTensor(RunOp("pad", {Tensor::empty(DType::kF64, {0, 2})}, Pads({1, 0, 0, 0})), DType::kF64,
               {1, 2}, {0, 0});
  ExpectTensor(RunOp("pad", {T(DType::kF64, {}, {3})}, Pads({})), DType::kF64, {}, {3});
  ExpectError("pad", {x}, Pads({1, 1}), "pads [1,1] has 2 entries; a tensor of rank 2 needs 4");
  ExpectError("pad", {x}, Pads({0, 3, 0, 0}, "reflect"), "must be smaller than its size 3");
  ExpectError("pad", {x}, Pads({0, 0, 0, 0}, "wrap"), "mode must be");
  ExpectError("pad", {x}, Pads({-3, 0, 0, 0}), "crop more than dimension 0 of size 2");
  ExpectError("pad", {Tensor::empty(DType::kF32, {0})}, Pads({1, 0}, "edge"), "needs an element");
}

TEST(PositionOps, TriluUpperLowerWithK) {
  for (DType t : kAllDTypes) {
    const Tensor x = Tensor::full(t, {3, 3}, 1);
    ExpectTensor(RunOp("trilu", {x}), t, {3, 3}, {1, 1, 1, 0, 1, 1, 0, 0, 1});
    ExpectTensor(RunOp("trilu", {x}, {{"upper", false}, {"k", int64_t{-1}}}), t, {3, 3},
                 {0, 0, 0, 1, 0, 0, 1, 1, 0});
  }
  const Tensor x = T(DType::kF32, {2, 2, 3}, {1, 2, 3, 4, 5, kNaN, 7, 8, 9, 10, 11, kInf});
  ExpectTensor(RunOp("trilu", {x}, {{"k", int64_t{1}}}), DType::kF32, {2, 2, 3},
               {0, 2, 3, 0, 0, kNaN, 0, 8, 9, 0, 0, kInf});
  ExpectTensor(RunOp("trilu", {x}, {{"k", int64_t{-5}}}), DType::kF32, {2, 2, 3},
               {1, 2, 3, 4, 5, kNaN, 7, 8, 9, 10, 11, kInf});
  ExpectTensor(RunOp("trilu", {x}, {{"k", int64_t{9}}, {"upper", true}}), DType::kF32, {2, 2, 3},
               std::vector<double>(12, 0));
  // Transposed last two dims: [[1,4],[2,5],[3,NaN]] of the first matrix.
  ExpectTensor(RunOp("trilu", {x.transpose(1, 2)}, {{"upper", false}}), DType::kF32, {2, 3, 2},
               {1, 0, 2, 5, 3, kNaN, 7, 0, 8, 11, 9, kInf});
  ExpectTensor(RunOp("trilu", {Tensor::empty(DType::kI32, {0, 4})}), DType::kI32, {0, 4}, {});
  ExpectError("trilu", {T(DType::kF32, {3}, {1, 2, 3})}, {}, "rank >= 2");
}

TEST(PositionOps, ProdReducesLikeSum) {
  const Tensor x = T(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(RunOp("prod", {x}), DType::kF64, {}, {720});
  ExpectTensor(RunOp("prod", {x}, {{"dims", std::vector<int64_t>{1}}}), DType::kF64, {2}, {6, 120});
  ExpectTensor(RunOp("prod", {x}, {{"dims", std::vector<int64_t>{-2}}, {"keepdim", true}}),
               DType::kF64, {1, 3}, {4, 10, 18});
  for (DType t : {DType::kF32, DType::kBF16}) {
    ExpectTensor(RunOp("prod", {T(t, {4}, {2, -0.5, kInf, 3})}), t, {}, {-kInf});
    ExpectTensor(RunOp("prod", {T(t, {3}, {2, kNaN, 0})}), t, {}, {kNaN});
  }
  // f32 products whose partial products overflow float but not the whole.
  ExpectTensor(RunOp("prod", {T(DType::kF32, {4}, {1e30, 1e30, 1e-30, 1e-30})}), DType::kF32, {},
               {1}, 1e-5);
  // Integers and bool give i64, wrapping.
  ExpectTensor(RunOp("prod", {T(DType::kI32, {3}, {-3, 4, 5})}), DType::kI64, {}, {-60});
  ExpectTensor(RunOp("prod", {T(DType::kU8, {2}, {200, 200})}), DType::kI64, {}, {40000});
  ExpectTensor(RunOp("prod", {T(DType::kBool, {3}, {1, 1, 0})}), DType::kI64, {}, {0});
  ExpectTensor(RunOp("prod", {T(DType::kI64, {2}, {4294967296.0, 4294967296.0})}), DType::kI64, {},
               {0});
  // Empty reductions give 1; a transposed operand.
  ExpectTensor(
      RunOp("prod", {Tensor::empty(DType::kF32, {0, 2})}, {{"dims", std::vector<int64_t>{0}}}),
      DType::kF32, {2}, {1, 1});
  ExpectTensor(RunOp("prod", {x.transpose(0, 1)}, {{"dims", std::vector<int64_t>{1}}}), DType::kF64,
               {3}, {4, 10, 18});
  ExpectError("prod", {x}, {{"dims", std::vector<int64_t>{2}}}, "out of range");
  ExpectError("prod", {x}, {{"dims", std::vector<int64_t>{1, -1}}}, "appears twice");
}

}  // namespace
}  // namespace crucible
