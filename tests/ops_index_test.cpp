// gather, gather_elements, argmax/argmin, cumsum and topk/topk_indices: hand values, every dtype,
// NaN, negative indices and dims, size-0 dims, non-contiguous operands, and the rules' errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

const DType kNumeric[] = {DType::kF64, DType::kF32, DType::kBF16,
                          DType::kI64, DType::kI32, DType::kU8};

TEST(GatherOps, GatherPicksSlicesByIndicesOfAnyRank) {
  for (DType t : kAllDTypes) {
    const Tensor x = T(t, {3, 2}, {1, 0, 0, 1, 1, 1});
    ExpectTensor(RunOp("gather", {x, T(DType::kI64, {2}, {2, -3})}, {{"dim", int64_t{0}}}), t,
                 {2, 2}, {1, 1, 1, 0});
  }
  const Tensor x = T(DType::kF64, {2, 3}, {1, 2, 3, 4, 5, kNaN});
  // A 0-d index drops the dim; a 2-d one replaces it with two.
  ExpectTensor(RunOp("gather", {x, T(DType::kI32, {}, {-1})}, {{"dim", int64_t{1}}}), DType::kF64,
               {2}, {3, kNaN});
  ExpectTensor(RunOp("gather", {x, T(DType::kI32, {2, 2}, {0, 2, 1, 1})}, {{"dim", int64_t{-1}}}),
               DType::kF64, {2, 2, 2}, {1, 3, 2, 2, 4, kNaN, 5, 5});
  // Size 0: an empty index, and an empty dim besides the gathered one.
  ExpectTensor(RunOp("gather", {x, Tensor::empty(DType::kI64, {0})}, {{"dim", int64_t{1}}}),
               DType::kF64, {2, 0}, {});
  ExpectTensor(RunOp("gather", {Tensor::empty(DType::kF32, {0, 3}), T(DType::kI64, {1}, {2})},
                     {{"dim", int64_t{1}}}),
               DType::kF32, {0, 1}, {});
  // Non-contiguous x (transposed) and index (stepped).
  const Tensor idx = T(DType::kI64, {4}, {1, 9, 0, 9}).slice(0, 0, 4, 2);
  ExpectTensor(RunOp("gather", {x.transpose(0, 1), idx}, {{"dim", int64_t{1}}}), DType::kF64,
               {3, 2}, {4, 1, 5, 2, kNaN, 3});
  ExpectError("gather", {x, T(DType::kI64, {2}, {0, 3})}, {{"dim", int64_t{1}}},
              "index 3 is out of range for dimension 1 of size 3");
  ExpectError("gather", {x, T(DType::kI64, {1}, {-4})}, {{"dim", int64_t{1}}}, "index -4");
  ExpectError("gather", {x, T(DType::kF32, {1}, {0})}, {{"dim", int64_t{0}}},
              "index must be i32 or i64, got f32");
  ExpectError("gather", {x, T(DType::kI64, {1}, {0})}, {{"dim", int64_t{2}}},
              "dim 2 is out of range");
  ExpectError("gather", {T(DType::kF32, {}, {1}), T(DType::kI64, {}, {0})}, {{"dim", int64_t{0}}},
              "rank >= 1");
}

TEST(GatherOps, GatherElementsIndexesAlongOneDim) {
  const Tensor x = T(DType::kF32, {2, 3}, {1, 2, 3, 4, kNaN, 6});
  // ONNX's example: out[i][j] = x[i][index[i][j]].
  ExpectTensor(
      RunOp("gather_elements", {x, T(DType::kI64, {2, 2}, {0, 0, 1, -3})}, {{"dim", int64_t{1}}}),
      DType::kF32, {2, 2}, {1, 1, kNaN, 4});
  ExpectTensor(RunOp("gather_elements", {x, T(DType::kI32, {3, 2}, {1, 0, 0, 1, 1, 1})},
                     {{"dim", int64_t{-2}}}),
               DType::kF32, {3, 2}, {4, 2, 1, kNaN, 4, kNaN});
  for (DType t : kAllDTypes) {
    ExpectTensor(RunOp("gather_elements", {T(t, {3}, {0, 1, 1}), T(DType::kI64, {4}, {2, 0, 0, 1})},
                       {{"dim", int64_t{0}}}),
                 t, {4}, {1, 0, 0, 1});
  }
  ExpectTensor(RunOp("gather_elements", {x.transpose(0, 1), T(DType::kI64, {1, 2}, {1, 0})},
                     {{"dim", int64_t{1}}}),
               DType::kF32, {1, 2}, {4, 1});
  ExpectTensor(
      RunOp("gather_elements", {x, Tensor::empty(DType::kI64, {2, 0})}, {{"dim", int64_t{0}}}),
      DType::kF32, {2, 0}, {});
  ExpectError("gather_elements", {x, T(DType::kI64, {1, 1}, {5})}, {{"dim", int64_t{1}}},
              "index 5 is out of range");
  ExpectError("gather_elements", {x, T(DType::kI64, {2}, {0, 0})}, {{"dim", int64_t{1}}},
              "must be equal");
  ExpectError("gather_elements", {x, Tensor::zeros(DType::kI64, {3, 1})}, {{"dim", int64_t{1}}},
              "larger than x");
}

TEST(GatherOps, ArgmaxArgminFirstNaNAndSelectLast) {
  for (DType t : kNumeric) {
    const Tensor x = T(t, {2, 4}, {1, 3, 3, 0, 2, 0, 2, 0});
    ExpectTensor(RunOp("argmax", {x}, {{"dim", int64_t{1}}}), DType::kI64, {2, 1}, {1, 0});
    ExpectTensor(RunOp("argmin", {x}, {{"dim", int64_t{-1}}, {"keepdim", false}}), DType::kI64, {2},
                 {3, 1});
    ExpectTensor(RunOp("argmax", {x}, {{"dim", int64_t{1}}, {"select_last_index", true}}),
                 DType::kI64, {2, 1}, {2, 2});
    ExpectTensor(RunOp("argmin", {x}, {{"dim", int64_t{0}}, {"select_last_index", true}}),
                 DType::kI64, {1, 4}, {0, 1, 1, 1});
  }
  const Tensor f = T(DType::kF64, {6}, {1, kNaN, 5, kNaN, -kInf, kInf});
  ExpectTensor(RunOp("argmax", {f}, {{"dim", int64_t{0}}}), DType::kI64, {1}, {1});
  ExpectTensor(RunOp("argmin", {f}, {{"dim", int64_t{0}}}), DType::kI64, {1}, {1});
  ExpectTensor(RunOp("argmax", {f}, {{"dim", int64_t{0}}, {"select_last_index", true}}),
               DType::kI64, {1}, {3});
  ExpectTensor(RunOp("argmin", {f.slice(0, 4, 6)}, {{"dim", int64_t{0}}}), DType::kI64, {1}, {0});
  // Transposed operand; an empty kept dim.
  const Tensor m = T(DType::kF32, {2, 3}, {5, 1, 7, 2, 9, 0});
  ExpectTensor(RunOp("argmax", {m.transpose(0, 1)}, {{"dim", int64_t{1}}}), DType::kI64, {3, 1},
               {0, 1, 0});
  ExpectTensor(RunOp("argmin", {Tensor::empty(DType::kF32, {0, 3})}, {{"dim", int64_t{1}}}),
               DType::kI64, {0, 1}, {});
  ExpectError("argmax", {Tensor::empty(DType::kF32, {2, 0})}, {{"dim", int64_t{1}}},
              "zero-size dimension 1");
  ExpectError("argmax", {T(DType::kBool, {1}, {1})}, {{"dim", int64_t{0}}},
              "not supported for bool");
  ExpectError("argmin", {m}, {}, "dim");
}

TEST(GatherOps, CumsumExclusiveReverseAndWrap) {
  for (DType t : kNumeric) {
    const Tensor x = T(t, {2, 3}, {1, 2, 3, 4, 5, 6});
    ExpectTensor(RunOp("cumsum", {x}, {{"dim", int64_t{1}}}), t, {2, 3}, {1, 3, 6, 4, 9, 15});
    ExpectTensor(RunOp("cumsum", {x}, {{"dim", int64_t{0}}, {"exclusive", true}}), t, {2, 3},
                 {0, 0, 0, 1, 2, 3});
    ExpectTensor(RunOp("cumsum", {x}, {{"dim", int64_t{-1}}, {"reverse", true}}), t, {2, 3},
                 {6, 5, 3, 15, 11, 6});
    ExpectTensor(
        RunOp("cumsum", {x}, {{"dim", int64_t{1}}, {"reverse", true}, {"exclusive", true}}), t,
        {2, 3}, {5, 3, 0, 11, 6, 0});
  }
  ExpectTensor(RunOp("cumsum", {T(DType::kU8, {2}, {200, 100})}, {{"dim", int64_t{0}}}), DType::kU8,
               {2}, {200, 44});
  ExpectTensor(RunOp("cumsum", {T(DType::kF32, {4}, {1, kInf, -kInf, 2})}, {{"dim", int64_t{0}}}),
               DType::kF32, {4}, {1, kInf, kNaN, kNaN});
  ExpectTensor(RunOp("cumsum", {T(DType::kF64, {3}, {1, kNaN, 1})}, {{"dim", int64_t{0}}}),
               DType::kF64, {3}, {1, kNaN, kNaN});
  const Tensor m = T(DType::kI32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(RunOp("cumsum", {m.transpose(0, 1)}, {{"dim", int64_t{1}}}), DType::kI32, {3, 2},
               {1, 5, 2, 7, 3, 9});
  ExpectTensor(RunOp("cumsum", {Tensor::empty(DType::kF32, {0, 2})}, {{"dim", int64_t{0}}}),
               DType::kF32, {0, 2}, {});
  ExpectError("cumsum", {T(DType::kBool, {1}, {1})}, {{"dim", int64_t{0}}},
              "not supported for bool");
  ExpectError("cumsum", {T(DType::kF32, {}, {1})}, {{"dim", int64_t{0}}}, "rank >= 1");
}

TEST(GatherOps, TopkTiesByLowerIndexNaNLargest) {
  for (DType t : kNumeric) {
    const Tensor x = T(t, {2, 4}, {1, 3, 3, 0, 2, 0, 2, 5});
    ExpectTensor(RunOp("topk", {x}, {{"k", int64_t{2}}}), t, {2, 2}, {3, 3, 5, 2});
    ExpectTensor(RunOp("topk_indices", {x}, {{"k", int64_t{2}}}), DType::kI64, {2, 2},
                 {1, 2, 3, 0});
    ExpectTensor(RunOp("topk", {x}, {{"k", int64_t{3}}, {"largest", false}}), t, {2, 3},
                 {0, 1, 3, 0, 2, 2});
    ExpectTensor(RunOp("topk_indices", {x}, {{"k", int64_t{1}}, {"dim", int64_t{0}}}), DType::kI64,
                 {1, 4}, {1, 0, 0, 1});
  }
  const Tensor f = T(DType::kF32, {5}, {1, kNaN, kInf, -kInf, kNaN});
  ExpectTensor(RunOp("topk", {f}, {{"k", int64_t{3}}}), DType::kF32, {3}, {kNaN, kNaN, kInf});
  ExpectTensor(RunOp("topk_indices", {f}, {{"k", int64_t{5}}, {"largest", false}}), DType::kI64,
               {5}, {3, 0, 2, 1, 4});
  ExpectTensor(RunOp("topk_indices", {f}, {{"k", int64_t{2}}, {"sorted", false}}), DType::kI64, {2},
               {1, 4});
  const Tensor m = T(DType::kF64, {2, 3}, {5, 1, 7, 2, 9, 0});
  ExpectTensor(RunOp("topk", {m.transpose(0, 1)}, {{"k", int64_t{1}}}), DType::kF64, {3, 1},
               {5, 9, 7});
  ExpectTensor(RunOp("topk", {m}, {{"k", int64_t{0}}}), DType::kF64, {2, 0}, {});
  ExpectTensor(RunOp("topk_indices", {Tensor::empty(DType::kF32, {0, 4})}, {{"k", int64_t{2}}}),
               DType::kI64, {0, 2}, {});
  ExpectError("topk", {m}, {{"k", int64_t{4}}}, "k=4 is out of range for dimension 1 of size 3");
  ExpectError("topk_indices", {m}, {{"k", int64_t{-1}}}, "k=-1");
  ExpectError("topk", {T(DType::kBool, {2}, {1, 0})}, {{"k", int64_t{1}}},
              "not supported for bool");
}

}  // namespace
}  // namespace crucible
