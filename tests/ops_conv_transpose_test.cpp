// conv_transpose2d: ONNX's hand-computed cases (plain, pads with strides, dilations), groups with
// bias and output_padding, every float dtype, randomized shapes against the adjoint of conv2d,
// non-contiguous operands, size-0 batches, and the type rule's errors.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Attrs Transpose(std::vector<int64_t> stride, std::vector<int64_t> padding,
                std::vector<int64_t> output_padding = {0}, std::vector<int64_t> dilation = {1},
                int64_t groups = 1) {
  return {{"stride", stride},
          {"padding", padding},
          {"output_padding", output_padding},
          {"dilation", dilation},
          {"groups", groups}};
}

Tensor Iota(DType t, Shape shape) {
  std::vector<double> v(static_cast<size_t>(Tensor::empty(DType::kF64, shape).numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return T(t, std::move(shape), v);
}

// ONNX's ConvTranspose example: x = 0..8 in 3x3, two output channels of 3x3 ones.
const std::vector<double> kOnnxPlain = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                        27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};

TEST(ConvTransposeOps, OnnxHandValuesInEveryFloatDtype) {
  for (DType t : {DType::kBF16, DType::kF32, DType::kF64}) {
    const Tensor x = Iota(t, {1, 1, 3, 3}), w = Tensor::full(t, {1, 2, 3, 3}, 1);
    std::vector<double> want = kOnnxPlain;
    want.insert(want.end(), kOnnxPlain.begin(), kOnnxPlain.end());
    ExpectTensor(RunOp("conv_transpose2d", {x, w}), t, {1, 2, 5, 5}, want);
    // ONNX's pads=[1,2,1,2] with strides [3,2] are torch's symmetric padding (1,2).
    const Tensor y = RunOp("conv_transpose2d", {x, w}, Transpose({3, 2}, {1, 2}));
    ExpectTensor(y.slice(1, 0, 1), t, {1, 1, 7, 3},
                 {1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4, 9, 7, 4, 9, 13, 7, 15, 13, 7, 15});
  }
  // Dilations [2,2].
  const Tensor x = T(DType::kF64, {1, 1, 3, 3}, {3, 8, 1, 9, 5, 7, 3, 2, 6});
  const Tensor w = T(DType::kF64, {1, 1, 2, 2}, {7, 2, 1, 9});
  ExpectTensor(RunOp("conv_transpose2d", {x, w}, Transpose({1}, {0}, {0}, {2})), DType::kF64,
               {1, 1, 5, 5}, {21, 56, 13, 16, 2,  63, 35, 67, 10, 14, 24, 22, 76,
                              76, 21, 9,  5,  88, 45, 63, 3,  2,  33, 18, 54});
}

TEST(ConvTransposeOps, GroupsBiasAndOutputPadding) {
  // Two groups of one channel each, stride 2 and output_padding 1: each output plane is its
  // channel's single product in the corner and the bias everywhere else.
  const Tensor x = T(DType::kF32, {1, 2, 1, 1}, {1, 2});
  const Tensor w = T(DType::kF32, {2, 1, 1, 1}, {3, 5});
  const Tensor b = T(DType::kF32, {2}, {10, 20});
  ExpectTensor(RunOp("conv_transpose2d", {x, w, b}, Transpose({2}, {0}, {1}, {1}, 2)), DType::kF32,
               {1, 2, 2, 2}, {13, 10, 10, 10, 30, 20, 20, 20});
  // NaN and inf reach the outputs their taps cover, and only those.
  const Tensor xs = T(DType::kF64, {1, 1, 1, 2}, {kNaN, kInf});
  ExpectTensor(
      RunOp("conv_transpose2d", {xs, T(DType::kF64, {1, 1, 1, 1}, {2})}, Transpose({1, 2}, {0})),
      DType::kF64, {1, 1, 1, 3}, {kNaN, 0, kInf});
}

// Random problem sizes and standard normal f64 tensors from one seed.
struct RandomDraws {
  explicit RandomDraws(uint64_t seed) : rng(seed) {}
  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  Tensor randn(Shape s) {
    std::vector<double> v(static_cast<size_t>(Tensor::empty(DType::kF64, s).numel()));
    for (double& e : v) e = std::normal_distribution<double>(0, 1)(rng);
    return T(DType::kF64, std::move(s), v);
  }
  std::mt19937_64 rng;
};

// <conv_transpose2d(x, w), y> == <x, conv2d(y, w)>: the transposed convolution is conv2d's
// adjoint, which checks every stride, padding, dilation and group against conv2d's kernel.
TEST(ConvTransposeOps, IsTheAdjointOfConv2dOnRandomShapes) {
  RandomDraws d(7);
  auto uni = [&](int lo, int hi) { return d.uni(lo, hi); };
  auto randn = [&](Shape shape) { return d.randn(std::move(shape)); };
  auto dot = [](const Tensor& a, const Tensor& b) {
    double s = 0;
    for (int64_t i = 0; i < a.numel(); ++i) s += a.get(i) * b.get(i);
    return s;
  };
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t g = uni(1, 2), cin = g * uni(1, 3), cout = g * uni(1, 3);
    const int64_t kh = uni(1, 3), kw = uni(1, 3), sh = uni(1, 3), sw = uni(1, 2);
    const int64_t ph = uni(0, 1), pw = uni(0, 1), dh = uni(1, 2), dw = uni(1, 2);
    const int64_t oph = uni(0, static_cast<int>(sh) - 1), opw = uni(0, static_cast<int>(sw) - 1);
    const Tensor x = randn({uni(1, 2), cin, uni(2, 5), uni(2, 5)});
    const Tensor w = randn({cin, cout / g, kh, kw});
    Tensor y;
    try {
      y = RunOp("conv_transpose2d", {x, w}, Transpose({sh, sw}, {ph, pw}, {oph, opw}, {dh, dw}, g));
    } catch (const Error&) {
      continue;  // padding larger than the full output
    }
    const Tensor r = randn(y.shape());
    const Tensor back = RunOp("conv2d", {r, w},
                              {{"stride", std::vector<int64_t>{sh, sw}},
                               {"padding", std::vector<int64_t>{ph, pw}},
                               {"dilation", std::vector<int64_t>{dh, dw}},
                               {"groups", g}});
    ASSERT_EQ(shape_str(back.shape()), shape_str(x.shape())) << trial;
    const double lhs = dot(y, r), rhs = dot(x, back);
    EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs))) << "trial " << trial;
  }
}

// The f32 result of the same operands within f32 rounding of the f64 one, element by element.
void ExpectF32MatchesF64(const std::vector<Tensor>& in64, const Attrs& attrs, const Tensor& y64,
                         int trial) {
  std::vector<Tensor> in32;
  for (const Tensor& t : in64) in32.push_back(t.to(DType::kF32));
  const Tensor y32 = RunOp("conv_transpose2d", in32, attrs);
  ASSERT_EQ(shape_str(y32.shape()), shape_str(y64.shape())) << trial;
  for (int64_t i = 0; i < y64.numel(); ++i) {
    ASSERT_NEAR(y32.get(i), y64.get(i), 1e-5 * (1 + std::abs(y64.get(i))))
        << "trial " << trial << " element " << i;
  }
}

// f32 runs oneDNN's deconvolution where it takes the problem, f64 the direct loop: on random
// shapes (groups, stride, dilation, padding, output padding, bias) the two agree to f32 rounding.
TEST(ConvTransposeOps, F32MatchesTheF64LoopOnRandomShapes) {
  RandomDraws d(11);
  auto uni = [&](int lo, int hi) { return d.uni(lo, hi); };
  auto randn = [&](Shape shape) { return d.randn(std::move(shape)); };
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t g = uni(1, 3), cin = g * uni(1, 4), cout = g * uni(1, 4);
    const int64_t kh = uni(1, 3), kw = uni(1, 3), sh = uni(1, 3), sw = uni(1, 2);
    const int64_t ph = uni(0, 2), pw = uni(0, 1), dh = uni(1, 2), dw = uni(1, 2);
    const int64_t oph = uni(0, static_cast<int>(sh) - 1), opw = uni(0, static_cast<int>(sw) - 1);
    std::vector<Tensor> in64 = {randn({uni(1, 3), cin, uni(2, 9), uni(2, 9)}),
                                randn({cin, cout / g, kh, kw})};
    if (trial % 2 == 0) in64.push_back(randn({cout}));
    const Attrs attrs = Transpose({sh, sw}, {ph, pw}, {oph, opw}, {dh, dw}, g);
    Tensor y64;
    try {
      y64 = RunOp("conv_transpose2d", in64, attrs);
    } catch (const Error&) {
      continue;  // padding larger than the full output
    }
    ExpectF32MatchesF64(in64, attrs, y64, trial);
    ++compared;
  }
  EXPECT_GT(compared, 40);
}

// The f32 shapes that take their own paths: a depthwise kernel tiling the output (a pool's
// gradient) and an output padding past the padding (a strided 1x1 downsample's gradient), with and
// without bias, agree with the f64 loop.
TEST(ConvTransposeOps, F32PoolAndDownsampleGradientShapesMatchTheF64Loop) {
  RandomDraws d(5);
  for (int trial = 0; trial < 24; ++trial) {
    const bool depthwise = trial % 2 == 0;
    const int64_t c = d.uni(1, 5), k = d.uni(1, 3), s = depthwise ? k : d.uni(2, 3);
    const int64_t op = d.uni(0, static_cast<int>(s) - 1);
    const int64_t kk = depthwise ? k : 1, g = depthwise ? c : 1, out = depthwise ? c : d.uni(1, 4);
    std::vector<Tensor> in64 = {d.randn({d.uni(1, 3), c, d.uni(1, 5), d.uni(1, 5)}),
                                d.randn({c, out / g, kk, kk})};
    if (trial % 4 < 2) in64.push_back(d.randn({out}));
    const Attrs attrs = Transpose({s, s}, {0, 0}, {op, op}, {1, 1}, g);
    const Tensor y64 = RunOp("conv_transpose2d", in64, attrs);
    ExpectF32MatchesF64(in64, attrs, y64, trial);
  }
}

TEST(ConvTransposeOps, NonContiguousOperandsAndEmptyBatch) {
  // The transposed input with a symmetric (all-ones) kernel gives the transposed output.
  const Tensor x = Iota(DType::kF32, {1, 1, 3, 3}), w = Tensor::full(DType::kF32, {1, 1, 3, 3}, 1);
  const Tensor y = RunOp("conv_transpose2d", {x.transpose(2, 3), w});
  const Tensor want = RunOp("conv_transpose2d", {x, w}).transpose(2, 3).contiguous();
  ExpectTensor(y, DType::kF32, {1, 1, 5, 5}, want.to_doubles());
  ExpectTensor(y, DType::kF32, {1, 1, 5, 5}, {0,  3,  9, 9,  6,  1,  8,  21, 20, 13, 3,  15, 36,
                                              33, 21, 3, 12, 27, 24, 15, 2,  7,  15, 13, 8});
  // N = 0 and no output channels are empty results.
  ExpectTensor(RunOp("conv_transpose2d", {Tensor::empty(DType::kF64, {0, 1, 3, 3}),
                                          Tensor::full(DType::kF64, {1, 2, 3, 3}, 1)}),
               DType::kF64, {0, 2, 5, 5}, {});
  ExpectTensor(RunOp("conv_transpose2d", {x, Tensor::empty(DType::kF32, {1, 0, 3, 3})}),
               DType::kF32, {1, 0, 5, 5}, {});
}

TEST(ConvTransposeOps, BadOperandsAreErrorsSayingWhy) {
  const Tensor x = Iota(DType::kF32, {1, 2, 3, 3}), w = Tensor::full(DType::kF32, {2, 1, 2, 2}, 1);
  ExpectError("conv_transpose2d", {x, Tensor::full(DType::kF32, {3, 1, 2, 2}, 1)}, {},
              "takes 3 input channels, but input [1,2,3,3] has 2");
  ExpectError("conv_transpose2d", {x, w}, Transpose({1}, {0}, {0}, {1}, 3), "not divisible");
  ExpectError("conv_transpose2d", {x, w}, Transpose({2}, {0}, {2}),
              "smaller than the stride 2x2 or the dilation 1x1");
  ExpectError("conv_transpose2d", {x, w}, Transpose({1}, {3}), "the output would be -2x-2");
  // Attributes from a file: sizes are computed wide, so huge ones are errors saying what they
  // make, never a signed overflow (UBSan's class).
  constexpr int64_t kHuge = int64_t{1} << 62;
  ExpectError("conv_transpose2d", {x, w}, Transpose({kHuge}, {0}), "the output size overflows");
  ExpectError("conv_transpose2d", {x, w}, Transpose({1}, {kHuge}),
              "the output would be -9223372036854775804x-9223372036854775804");
  ExpectError("conv_transpose2d", {x, w}, Transpose({1}, {0}, {0}, {kHuge}), "is too large");
  ExpectError("conv_transpose2d", {x, w.to(DType::kF64)}, {}, "weight dtype f64");
  ExpectError("conv_transpose2d", {x.to(DType::kI32), w.to(DType::kI32)}, {}, "floating-point");
  ExpectError("conv_transpose2d", {x, w, T(DType::kF32, {2}, {1, 2})}, {}, "must be [1]");
  ExpectError("conv_transpose2d", {Tensor::empty(DType::kF32, {1, 2, 0, 3}), w}, {},
              "non-empty C, H and W");
  ExpectError("conv_transpose2d", {x.reshape(std::vector<int64_t>{2, 3, 3}), w}, {}, "must be 4-D");
}

}  // namespace
}  // namespace crucible
