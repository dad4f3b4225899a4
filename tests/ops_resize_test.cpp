// resize (ONNX Resize on H and W): ONNX's hand-computed cases for nearest and linear in every
// coordinate transformation and rounding mode, a given scale against out / in, every float
// dtype, NaN and inf, non-contiguous input, size-0 dims, and the type rule's errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Attrs Resize(std::vector<int64_t> sizes, std::string mode, std::string coord,
             std::string rounding = "round_prefer_floor") {
  return {{"sizes", sizes},
          {"mode", mode},
          {"coordinate_transformation_mode", coord},
          {"nearest_mode", rounding}};
}

TEST(ResizeOps, NearestAndLinearInEveryFloatDtype) {
  for (DType t : {DType::kBF16, DType::kF32, DType::kF64}) {
    const Tensor x = T(t, {1, 1, 2, 2}, {1, 2, 3, 4});
    // ONNX's upsample_scales_nearest: x2 rows, x3 columns.
    ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 4, 6}, "nearest", "half_pixel")), t,
                 {1, 1, 4, 6},
                 {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
    // ONNX's upsample_scales_linear (half_pixel) and its align_corners variant.
    ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 4, 4}, "linear", "half_pixel")), t,
                 {1, 1, 4, 4},
                 {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
    ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 4, 4}, "linear", "align_corners")), t,
                 {1, 1, 4, 4},
                 {1, 4. / 3, 5. / 3, 2, 5. / 3, 2, 7. / 3, 8. / 3, 7. / 3, 8. / 3, 3, 10. / 3, 3,
                  10. / 3, 11. / 3, 4},
                 t == DType::kBF16 ? 1e-2 : 1e-6);
  }
}

TEST(ResizeOps, AGivenScaleIsWhatTheCoordinatesUse) {
  // ONNX's downsample_scales_linear: scale 0.6 gives 1x2 out of 2x4, at coordinates 1/3 and 2.
  const Tensor x = T(DType::kF32, {1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Attrs a = Resize({1, 1, 1, 2}, "linear", "half_pixel");
  a.set("scale_h", 0.6);
  a.set("scale_w", 0.6);
  ExpectTensor(RunOp("resize", {x}, a), DType::kF32, {1, 1, 1, 2}, {8. / 3, 13. / 3});
  // Without it the scale is out / in = 0.5: coordinates 0.5 and 2.5.
  ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 1, 2}, "linear", "half_pixel")), DType::kF32,
               {1, 1, 1, 2}, {3.5, 5.5});
  // align_corners with scale 0.6: ONNX's out is 0.6 * 4 = 2.4, so column 1 reads 3 / 1.4.
  a.set("coordinate_transformation_mode", std::string("align_corners"));
  ExpectTensor(RunOp("resize", {x}, a), DType::kF32, {1, 1, 1, 2}, {1, 1 + 3 / 1.4});
}

TEST(ResizeOps, RoundingModesAndCoordinateTransforms) {
  const Tensor x = T(DType::kF64, {1, 1, 1, 2}, {10, 20});
  // asymmetric x / 2 = 0, 0.5, 1, 1.5: the halves go down or up as the mode says.
  for (const auto& [mode, want] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"round_prefer_floor", {10, 10, 20, 20}},
           {"round_prefer_ceil", {10, 20, 20, 20}},
           {"floor", {10, 10, 20, 20}},
           {"ceil", {10, 20, 20, 20}}}) {
    ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 1, 4}, "nearest", "asymmetric", mode)),
                 DType::kF64, {1, 1, 1, 4}, want);
  }
  const Tensor y = T(DType::kF64, {1, 1, 1, 4}, {10, 20, 30, 40});
  // tf_half_pixel_for_nn: (x + 0.5) / 0.5 = 1, 3.
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 1, 2}, "nearest", "tf_half_pixel_for_nn")),
               DType::kF64, {1, 1, 1, 2}, {20, 40});
  // half_pixel: 0.5, 2.5 round to 0, 2 (prefer floor) or 1, 3 (ceil).
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 1, 2}, "nearest", "half_pixel")), DType::kF64,
               {1, 1, 1, 2}, {10, 30});
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 1, 2}, "nearest", "half_pixel", "ceil")),
               DType::kF64, {1, 1, 1, 2}, {20, 40});
  // pytorch_half_pixel to one element reads coordinate -0.5, the first; half_pixel the middle.
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 1, 1}, "linear", "pytorch_half_pixel")),
               DType::kF64, {1, 1, 1, 1}, {10});
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 1, 1}, "linear", "half_pixel")), DType::kF64,
               {1, 1, 1, 1}, {25});
}

TEST(ResizeOps, NaNInfNonContiguousAndEmpty) {
  const Tensor x = T(DType::kF32, {1, 1, 2, 2}, {kNaN, 1, kInf, 2});
  ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 2, 4}, "nearest", "asymmetric", "floor")),
               DType::kF32, {1, 1, 2, 4}, {kNaN, kNaN, 1, 1, kInf, kInf, 2, 2});
  // Linear: a NaN spreads to every output it weighs on, and a tap of weight 0 still reads its
  // element (0 * inf is NaN), as torch's bilinear and ONNX's reference both do.
  ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 2, 3}, "linear", "align_corners")), DType::kF32,
               {1, 1, 2, 3}, {kNaN, kNaN, 1, kNaN, kNaN, 2});
  ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 3, 2}, "linear", "align_corners")), DType::kF32,
               {1, 1, 3, 2}, {kNaN, 1, kNaN, 1.5, kNaN, 2});
  // Transposed H and W: [[1, 3], [2, 4]].
  const Tensor y = T(DType::kF64, {1, 1, 2, 2}, {1, 2, 3, 4}).transpose(2, 3);
  ExpectTensor(RunOp("resize", {y}, Resize({1, 1, 2, 4}, "linear", "align_corners")), DType::kF64,
               {1, 1, 2, 4}, {1, 5. / 3, 7. / 3, 3, 2, 8. / 3, 10. / 3, 4});
  // Size 0: an empty batch, an empty output, an empty input to an empty output.
  ExpectTensor(RunOp("resize", {Tensor::empty(DType::kF32, {0, 3, 2, 2})},
                     Resize({0, 3, 4, 4}, "linear", "half_pixel")),
               DType::kF32, {0, 3, 4, 4}, {});
  ExpectTensor(RunOp("resize", {x}, Resize({1, 1, 0, 3}, "nearest", "half_pixel")), DType::kF32,
               {1, 1, 0, 3}, {});
  ExpectTensor(RunOp("resize", {Tensor::empty(DType::kF64, {1, 1, 0, 2})},
                     Resize({1, 1, 0, 5}, "nearest", "half_pixel")),
               DType::kF64, {1, 1, 0, 5}, {});
}

TEST(ResizeOps, BadOperandsAreErrorsSayingWhy) {
  const Tensor x = T(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4});
  ExpectError("resize", {x}, Resize({2, 1, 4, 4}, "nearest", "half_pixel"),
              "sizes [2,1,4,4] must be the output shape [N, C, OH, OW] of input [1,1,2,2]");
  ExpectError("resize", {x}, Resize({1, 1, 4}, "nearest", "half_pixel"), "must be the output");
  ExpectError("resize", {x}, Resize({1, 1, 4, 4}, "cubic", "half_pixel"),
              "mode must be one of 'nearest', 'linear', got 'cubic'");
  ExpectError("resize", {x}, Resize({1, 1, 4, 4}, "linear", "tf_crop_and_resize"),
              "coordinate_transformation_mode must be one of");
  ExpectError("resize", {x}, Resize({1, 1, 4, 4}, "nearest", "half_pixel", "up"),
              "nearest_mode must be one of");
  ExpectError("resize", {x}, Resize({1, 1, -1, 4}, "nearest", "half_pixel"), "negative dim");
  Attrs a = Resize({1, 1, 4, 4}, "linear", "half_pixel");
  a.set("scale_w", 0.0);
  ExpectError("resize", {x}, a, "scale_w must be positive and finite, got 0");
  ExpectError("resize", {Tensor::empty(DType::kF32, {1, 1, 0, 2})},
              Resize({1, 1, 3, 2}, "nearest", "half_pixel"), "cannot resize an empty dim 2");
  ExpectError("resize", {x.to(DType::kI32)}, Resize({1, 1, 4, 4}, "nearest", "half_pixel"),
              "floating-point");
  ExpectError("resize", {T(DType::kF32, {1, 2}, {1, 2})}, Resize({1, 4}, "nearest", "half_pixel"),
              "must be 4-D");
}

}  // namespace
}  // namespace crucible
