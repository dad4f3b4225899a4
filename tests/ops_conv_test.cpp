// conv2d against a naive double-precision reference on randomized shapes (strides, padding,
// dilation, groups, depthwise, zero sizes, non-contiguous operands) in f32, f64 and bf16, and its
// type rule's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/rng.h"
#include "crucible/ir/text_format.h"
#include "test_util.h"

namespace crucible {
namespace {

using namespace testing::op_helpers;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;

  Attrs attrs() const {
    return {{"stride", std::vector<int64_t>{sh, sw}},
            {"padding", std::vector<int64_t>{ph, pw}},
            {"dilation", std::vector<int64_t>{dh, dw}},
            {"groups", groups}};
  }
  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  std::string str() const {
    return "n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
           std::to_string(w) + " o" + std::to_string(o) + " k" + std::to_string(kh) + "x" +
           std::to_string(kw) + " s" + std::to_string(sh) + "," + std::to_string(sw) + " p" +
           std::to_string(ph) + "," + std::to_string(pw) + " d" + std::to_string(dh) + "," +
           std::to_string(dw) + " g" + std::to_string(groups) + (bias ? " bias" : "");
  }
};

Tensor Uniform(DType dtype, Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  fill_uniform(t, seed, -1.0, 1.0);
  return t;
}

// The convolution straight from its definition, in double, with sum |x w| per output (the scale of
// any summation order's rounding error).
void RefConv(const ConvCase& k, const Tensor& x, const Tensor& w, const Tensor& b,
             std::vector<double>& out, std::vector<double>& abs_sum) {
  const std::vector<double> xv = x.to_doubles(), wv = w.to_doubles();
  const std::vector<double> bv = b.defined() ? b.to_doubles() : std::vector<double>(k.o, 0.0);
  const int64_t cg = k.c / k.groups, og = k.o / k.groups, oh = k.oh(), ow = k.ow();
  out.assign(k.n * k.o * oh * ow, 0.0);
  abs_sum.assign(out.size(), 0.0);
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t oc = 0; oc < k.o; ++oc) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t z = 0; z < ow; ++z) {
          double s = bv[oc], a = std::abs(bv[oc]);
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t ic = oc / og * cg + ci;
            for (int64_t i = 0; i < k.kh; ++i) {
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = y * k.sh - k.ph + i * k.dh, iw = z * k.sw - k.pw + j * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const double p = xv[((n * k.c + ic) * k.h + ih) * k.w + iw] *
                                 wv[((oc * cg + ci) * k.kh + i) * k.kw + j];
                s += p;
                a += std::abs(p);
              }
            }
          }
          const size_t at = ((n * k.o + oc) * oh + y) * ow + z;
          out[at] = s;
          abs_sum[at] = a;
        }
      }
    }
  }
}

double UnitRoundoff(DType t) {
  return t == DType::kF64 ? 0x1p-53 : t == DType::kF32 ? 0x1p-24 : 0x1p-8;
}

// Runs conv2d on (x, w[, b]) and checks every output against the reference within the error bound
// of a K-term dot product in f32/f64 (plus one final rounding for bf16 storage).
void CheckConv(const ConvCase& k, const Tensor& x, const Tensor& w, const Tensor& b) {
  SCOPED_TRACE(k.str() + " " + std::string(dtype_name(x.dtype())));
  std::vector<Tensor> in{x, w};
  if (b.defined()) in.push_back(b);
  const Tensor y = Op("conv2d", in, k.attrs());
  ASSERT_EQ(y.dtype(), x.dtype());
  ASSERT_EQ(shape_str(y.shape()), shape_str(Shape{k.n, k.o, k.oh(), k.ow()}));
  std::vector<double> ref, abs_sum;
  RefConv(k, x, w, b, ref, abs_sum);
  const double terms = static_cast<double>(k.c / k.groups * k.kh * k.kw + 1);
  const double acc_u = UnitRoundoff(x.dtype() == DType::kBF16 ? DType::kF32 : x.dtype());
  const std::vector<double> got = y.to_doubles();
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 5; ++i) {
    const double tol =
        2 * terms * acc_u * abs_sum[i] + UnitRoundoff(x.dtype()) * std::abs(ref[i]) + 1e-300;
    if (!(std::abs(got[i] - ref[i]) <= tol)) {
      ADD_FAILURE() << "output " << i << ": got " << got[i] << ", want " << ref[i] << " (tol "
                    << tol << ")";
      ++bad;
    }
  }
}

void CheckConv(const ConvCase& k, DType dtype, uint64_t seed) {
  const Tensor x = Uniform(dtype, {k.n, k.c, k.h, k.w}, seed);
  const Tensor w = Uniform(dtype, {k.o, k.c / k.groups, k.kh, k.kw}, seed + 1);
  const Tensor b = k.bias ? Uniform(dtype, {k.o}, seed + 2) : Tensor();
  CheckConv(k, x, w, b);
}

// Random problems over every geometry knob; `wide` draws channel counts large enough for oneDNN's
// channel-blocked kernels (several 16-channel blocks plus a remainder).
ConvCase RandomCase(std::mt19937& rng, bool wide) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (;;) {
    ConvCase k{};
    k.n = pick(1, 3);
    const int64_t mode = pick(0, 3);  // plain, grouped, depthwise, depthwise with multiplier
    const int64_t cg = mode >= 2 ? 1 : wide ? pick(5, 40) : pick(1, 4);
    k.groups = mode == 0 ? 1 : mode == 1 ? pick(2, 3) : wide ? pick(17, 40) : pick(2, 6);
    k.c = cg * k.groups;
    k.o = k.groups * (mode == 2 ? 1 : wide && mode == 0 ? pick(5, 40) : pick(1, 3));
    k.h = pick(1, 13);
    k.w = pick(1, 13);
    k.kh = pick(1, 5);
    k.kw = pick(1, 5);
    k.sh = pick(1, 3);
    k.sw = pick(1, 3);
    k.ph = pick(0, 2);
    k.pw = pick(0, 2);
    k.dh = pick(1, 2);
    k.dw = pick(1, 2);
    k.bias = pick(0, 3) != 0;
    if (k.dh * (k.kh - 1) + 1 <= k.h + 2 * k.ph && k.dw * (k.kw - 1) + 1 <= k.w + 2 * k.pw)
      return k;
  }
}

TEST(Conv2d, RandomizedShapesMatchReferenceInEveryDtype) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 60; ++i) {
    const ConvCase k = RandomCase(rng, i % 3 == 2);
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) CheckConv(k, dt, 100 + i);
  }
}

// The layers the model suites use, each through its own kernel path: a ResNet 3x3 (blocked
// activations), a 1x1 projection with stride 2 (plain GEMM), the 7x7/2 stem on 3 channels (plain
// input, blocked output), MobileNetV2's depthwise 3x3 at stride 1 and 2 (the direct loop), a
// grouped 3x3 and a dilated 3x3.
TEST(Conv2d, ModelLayersMatchReference) {
  const ConvCase cases[] = {
      {2, 32, 10, 9, 48, 3, 3, 1, 1, 1, 1},
      {2, 48, 9, 11, 40, 1, 1, 2, 2, 0, 0},
      {1, 3, 23, 21, 16, 7, 7, 2, 2, 3, 3},
      {2, 48, 11, 9, 48, 3, 3, 1, 1, 1, 1, 1, 1, 48},
      {2, 48, 11, 9, 48, 3, 3, 2, 2, 1, 1, 1, 1, 48},
      {2, 32, 9, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},
      {1, 16, 12, 12, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1},
      // Depthwise 5x5 (EfficientNet) at stride 2 with dilation, one with a channel multiplier, and
      // rows narrower than the kernel, where every output column is a border column.
      {2, 24, 13, 12, 24, 5, 5, 2, 2, 2, 2, 1, 2, 24},
      {1, 8, 9, 10, 16, 5, 5, 1, 1, 2, 2, 1, 1, 8},
      {2, 8, 6, 1, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8},
      {1, 8, 2, 3, 8, 5, 5, 1, 2, 2, 2, 1, 1, 8},
  };
  uint64_t seed = 500;
  for (const ConvCase& k : cases) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) CheckConv(k, dt, seed++);
  }
}

TEST(Conv2d, NonContiguousOperandsMatchReference) {
  const ConvCase k{2, 20, 9, 7, 24, 3, 2, 2, 1, 1, 1, 1, 2, 2};
  for (DType dt : {DType::kF32, DType::kF64}) {
    // x stored NHWC and viewed as NCHW; w stored with kh and kw swapped; b a strided slice.
    const Tensor x = Uniform(dt, {k.n, k.h, k.w, k.c}, 7).permute(std::vector<int64_t>{0, 3, 1, 2});
    const Tensor w = Uniform(dt, {k.o, k.c / k.groups, k.kw, k.kh}, 8).transpose(2, 3);
    const Tensor b = Uniform(dt, {2 * k.o}, 9).slice(0, 0, 2 * k.o, 2);
    ASSERT_FALSE(x.is_contiguous());
    CheckConv(k, x, w, b);
  }
}

TEST(Conv2d, DefaultAttributesAreUnitStrideNoPaddingOneGroup) {
  const Tensor x = Uniform(DType::kF32, {1, 2, 5, 6}, 3), w = Uniform(DType::kF32, {3, 2, 2, 3}, 4);
  const Tensor y = Op("conv2d", {x, w});
  EXPECT_EQ(shape_str(y.shape()), "[1,3,4,4]");
  const ConvCase k{1, 2, 5, 6, 3, 2, 3, 1, 1, 0, 0, 1, 1, 1, false};
  CheckConv(k, x, w, Tensor());
  // A single int means the same value for height and width, as in PyTorch.
  EXPECT_EQ(
      shape_str(Op("conv2d", {x, w}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}}).shape()),
      "[1,3,3,3]");
}

TEST(Conv2d, ZeroSizedDims) {
  // An empty batch gives an empty result.
  const Tensor w = Uniform(DType::kF32, {4, 3, 3, 3}, 1), b = Uniform(DType::kF32, {4}, 2);
  const Tensor y0 = Op("conv2d", {Tensor::empty(DType::kF32, {0, 3, 5, 5}), w, b});
  EXPECT_EQ(shape_str(y0.shape()), "[0,4,3,3]");
  // No input channels, or an input that is all padding: every output is its channel's bias.
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16}) {
    const Tensor bias = Uniform(dt, {4}, 3);
    const Tensor none =
        Op("conv2d", {Tensor::empty(dt, {2, 0, 4, 4}), Tensor::empty(dt, {4, 0, 3, 3}), bias});
    const Tensor pad =
        Op("conv2d", {Tensor::empty(dt, {1, 3, 0, 2}), Uniform(dt, {4, 3, 2, 2}, 4), bias},
           {{"padding", std::vector<int64_t>{1, 1}}});
    EXPECT_EQ(shape_str(pad.shape()), "[1,4,1,3]");
    for (const Tensor& y : {none, pad}) {
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t oc = i / (y.shape()[2] * y.shape()[3]) % 4;
        ASSERT_EQ(y.get(i), bias.get(oc)) << "element " << i;
      }
    }
    const Tensor nobias =
        Op("conv2d", {Tensor::empty(dt, {1, 0, 3, 3}), Tensor::empty(dt, {2, 0, 1, 1})});
    for (double v : nobias.to_doubles()) EXPECT_EQ(v, 0.0);
  }
}

// Each bad conv2d gives a GraphError naming the op and what is wrong.
void ExpectGraphError(std::vector<Tensor> in, Attrs attrs, const std::string& needle) {
  try {
    run_op("conv2d", in, std::move(attrs));
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const GraphError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("conv2d: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos)
        << "message '" << msg << "' lacks '" << needle << "'";
  }
}

TEST(Conv2d, BadInputIsAGraphErrorSayingWhy) {
  const auto x = [](Shape s) { return Tensor::zeros(DType::kF32, std::move(s)); };
  ExpectGraphError({x({1, 6, 5, 5}), x({4, 1, 3, 3})}, {{"groups", int64_t{4}}},
                   "input channels 6 are not divisible by groups=4");
  ExpectGraphError({x({1, 8, 5, 5}), x({4, 3, 3, 3})}, {{"groups", int64_t{2}}},
                   "weight [4,3,3,3] takes 3 input channels per group (6 for groups=2), but input "
                   "[1,8,5,5] has 8");
  ExpectGraphError({x({1, 8, 5, 5}), x({5, 4, 3, 3})}, {{"groups", int64_t{2}}},
                   "weight [5,4,3,3] has 5 output channels, not divisible by groups=2");
  ExpectGraphError({x({1, 2, 4, 4}), x({3, 2, 7, 3})}, {{"padding", std::vector<int64_t>{1, 1}}},
                   "kernel 7x3 (dilation 1x1, so 7x3) is larger than the padded input 6x6");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"dilation", std::vector<int64_t>{3, 1}}},
                   "kernel 3x3 (dilation 3x1, so 7x3) is larger than the padded input 5x5");
  ExpectGraphError({x({2, 5, 5}), x({3, 2, 3, 3})}, {},
                   "input must be 4-D [N,C,H,W], got 3-D [2,5,5]");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3})}, {}, "weight must be 4-D");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3}), x({2})}, {}, "bias shape [2] must be [3]");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"stride", std::vector<int64_t>{0, 1}}},
                   "stride must be positive, got [0,1]");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"padding", std::vector<int64_t>{1, 2, 3}}},
                   "padding must have 1 or 2 elements (height, width), got [1,2,3]");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"groups", int64_t{0}}},
                   "groups must be positive, got 0");
  // Sizes past int64 from a file's attributes are an error, not a signed overflow.
  constexpr int64_t kHuge = int64_t{1} << 62;
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"padding", kHuge}},
                   "the output size overflows int64");
  ExpectGraphError({x({1, 2, 5, 5}), x({3, 2, 3, 3})}, {{"dilation", kHuge}},
                   "the output size overflows int64");
  ExpectGraphError({x({1, 2, 5, 5}), Tensor::zeros(DType::kF64, {3, 2, 3, 3})}, {},
                   "weight dtype f64 differs from input dtype f32");
  ExpectGraphError({Tensor::zeros(DType::kI64, {1, 2, 5, 5}), x({3, 2, 3, 3})}, {},
                   "input must be floating-point");
}

TEST(Conv2d, MalformedGraphNamesLineAndReason) {
  try {
    parse_graph(
        "graph g(%x: f32[1,6,8,8]) {\n  param %w: f32[4,1,3,3] = zeros()\n"
        "  %y = conv2d(%x, %w, groups=4)\n  return %y\n}\n",
        "t.graph");
    ADD_FAILURE() << "parsed without error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.graph:3:8: conv2d: input channels 6 are not divisible by groups=4");
  }
}

}  // namespace
}  // namespace crucible
