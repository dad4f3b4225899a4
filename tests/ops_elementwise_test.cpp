// Elementwise op family: hand-computed values, PyTorch promotion and broadcasting, integer wrap,
// NaN rules, bf16 rounding, strided and zero-size operands, the parallel paths, and errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/core/fast_math.h"
#include "crucible/core/parallel_grain.h"
#include "crucible/ir/type_rules.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

Tensor Scalar(DType dtype, double v) { return T(dtype, {}, {v}); }

// ---------------------------------------------------------------------------------------------------
// Unary ops keeping the dtype

// The fork threshold eager and codegen share: 64 Ki adds stay on one thread (slower on two here),
// 96 Ki fork; a libm-class element counts 8, a data move nothing.
TEST(ParallelGrain, WorkDecidesAndCostsWeighIt) {
  EXPECT_FALSE(worth_parallel(65536));
  EXPECT_TRUE(worth_parallel(98304));
  EXPECT_EQ(element_cost("add"), 1);
  EXPECT_EQ(element_cost("softmax"), kTranscendentalCost);
  EXPECT_EQ(element_cost("cat"), 0);
  EXPECT_TRUE(worth_parallel(16384, element_cost("sin")));
  EXPECT_FALSE(worth_parallel(1 << 30, element_cost("reshape")));
}

TEST(Unary, NegWrapsUnsignedAndSignedMinimum) {
  ExpectTensor(RunOp("neg", {T(DType::kF32, {3}, {1.5, -2, 0})}), DType::kF32, {3}, {-1.5, 2, 0});
  ExpectTensor(RunOp("neg", {T(DType::kU8, {3}, {1, 0, 255})}), DType::kU8, {3}, {255, 0, 1});
  ExpectTensor(RunOp("neg", {T(DType::kI32, {2}, {-2147483648.0, 7})}), DType::kI32, {2},
               {-2147483648.0, -7});
  ExpectTensor(RunOp("neg", {T(DType::kI64, {1}, {-5})}), DType::kI64, {1}, {5});
  ExpectErrorWith([] { RunOp("neg", {T(DType::kBool, {1}, {1})}); }, "neg: not supported for bool");
}

TEST(Unary, AbsAndRelu) {
  ExpectTensor(RunOp("abs", {T(DType::kF32, {4}, {-1.5, 2, -0.0, kNaN})}), DType::kF32, {4},
               {1.5, 2, 0, kNaN});
  Tensor minus_zero = RunOp("abs", {T(DType::kF64, {1}, {-0.0})});
  EXPECT_FALSE(std::signbit(minus_zero.get(0)));
  ExpectTensor(RunOp("abs", {T(DType::kI32, {3}, {-3, 4, -2147483648.0})}), DType::kI32, {3},
               {3, 4, -2147483648.0});
  ExpectTensor(RunOp("abs", {T(DType::kU8, {2}, {200, 0})}), DType::kU8, {2}, {200, 0});
  ExpectTensor(RunOp("relu", {T(DType::kF32, {4}, {-1, 0, 3, kNaN})}), DType::kF32, {4},
               {0, 0, 3, kNaN});
  ExpectTensor(RunOp("relu", {T(DType::kI64, {3}, {-7, 0, 7})}), DType::kI64, {3}, {0, 0, 7});
  ExpectTensor(RunOp("relu", {T(DType::kU8, {2}, {0, 200})}), DType::kU8, {2}, {0, 200});
  ExpectErrorWith([] { RunOp("abs", {T(DType::kBool, {1}, {1})}); }, "not supported for bool");
  ExpectErrorWith([] { RunOp("relu", {T(DType::kBool, {1}, {0})}); },
                  "relu: not supported for bool");
}

// ---------------------------------------------------------------------------------------------------
// Float-valued unary ops

TEST(Unary, FloatMathMatchesLibm) {
  const std::vector<double> xs = {0.25, 1.0, 2.5};
  struct Case {
    const char* op;
    double (*f)(double);
  };
  const Case cases[] = {
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"reciprocal", [](double x) { return 1 / x; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<double> want;
    for (double x : xs) want.push_back(c.f(x));
    ExpectTensor(RunOp(c.op, {T(DType::kF32, {3}, xs)}), DType::kF32, {3}, want, 1e-6);
    ExpectTensor(RunOp(c.op, {T(DType::kF64, {3}, xs)}), DType::kF64, {3}, want, 1e-14);
  }
}

// Eager's f32 sin and cos run glibc's vector math on AVX-512 builds: within 4 ulp of the exact
// value (glibc's bound) over small, large and huge arguments, odd-sized tails, NaN for NaN and
// infinities, and sin(-0) = -0.
TEST(Unary, F32SinCosWithinFourUlpOnAnyArgument) {
  std::mt19937 rng(9);
  std::vector<double> xs;
  for (double scale : {1.0, 10.0, 1e3, 1e5, 1e9, 1e30}) {
    std::uniform_real_distribution<double> u(-scale, scale);
    for (int i = 0; i < 997; ++i) xs.push_back(static_cast<float>(u(rng)));
  }
  for (double v : {0.0, -0.0, 3.14159265358979, 1e-40, -1e-30}) xs.push_back(static_cast<float>(v));
  const Tensor x = T(DType::kF32, {static_cast<int64_t>(xs.size())}, xs);
  for (const char* op : {"sin", "cos"}) {
    SCOPED_TRACE(op);
    const Tensor y = RunOp(op, {x});
    const float* got = y.data<float>();
    int bad = 0;
    for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
      const double want = std::string(op) == "sin" ? std::sin(xs[i]) : std::cos(xs[i]);
      const float w = static_cast<float>(want);
      const double ulp = std::nextafter(std::abs(w), INFINITY) - std::abs(w);
      if (!(std::abs(got[i] - want) <= 4 * ulp)) {
        ADD_FAILURE() << op << "(" << xs[i] << ") = " << got[i] << ", exact " << want;
        ++bad;
      }
    }
    if (std::string(op) == "sin") {
      EXPECT_TRUE(std::signbit(got[xs.size() - 4]));  // sin(-0)
    }
  }
  const Tensor special = T(DType::kF32, {3}, {kNaN, kInf, -kInf});
  for (const char* op : {"sin", "cos"}) {
    const Tensor y = RunOp(op, {special});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y.data<float>()[i])) << op << " " << i;
  }
}

TEST(Unary, FloatOpsOfIntegersAndBoolGiveF32) {
  ExpectTensor(RunOp("exp", {T(DType::kI32, {2}, {0, 1})}), DType::kF32, {2}, {1, std::exp(1.0)});
  ExpectTensor(RunOp("sqrt", {T(DType::kU8, {2}, {4, 9})}), DType::kF32, {2}, {2, 3});
  ExpectTensor(RunOp("sigmoid", {T(DType::kBool, {2}, {0, 1})}), DType::kF32, {2},
               {0.5, 1 / (1 + std::exp(-1.0))});
  ExpectTensor(RunOp("reciprocal", {T(DType::kI64, {2}, {4, 0})}), DType::kF32, {2}, {0.25, kInf});
}

TEST(Unary, FloatEdgeValues) {
  ExpectTensor(RunOp("log", {T(DType::kF32, {3}, {0, -1, kInf})}), DType::kF32, {3},
               {-kInf, kNaN, kInf});
  ExpectTensor(RunOp("sigmoid", {T(DType::kF32, {3}, {-1000, 1000, kNaN})}), DType::kF32, {3},
               {0, 1, kNaN});
  ExpectTensor(RunOp("rsqrt", {T(DType::kF32, {2}, {0, 4})}), DType::kF32, {2}, {kInf, 0.5});
  ExpectTensor(RunOp("tanh", {T(DType::kF32, {2}, {-100, 100})}), DType::kF32, {2}, {-1, 1});
}

TEST(Unary, Gelu) {
  const Tensor x = T(DType::kF32, {3}, {-1, 0, 1});
  // 0.5 x (1 + erf(x / sqrt 2)) and the tanh approximation, computed by hand in double.
  ExpectTensor(RunOp("gelu", {x}), DType::kF32, {3}, {-0.15865525393145707, 0, 0.8413447460685429},
               1e-6);
  ExpectTensor(RunOp("gelu", {x}, {{"approximate", std::string("none")}}), DType::kF32, {3},
               {-0.15865525393145707, 0, 0.8413447460685429}, 1e-6);
  ExpectTensor(RunOp("gelu", {x}, {{"approximate", std::string("tanh")}}), DType::kF32, {3},
               {-0.15880800939172324, 0, 0.8411919906082768}, 1e-6);
  ExpectTensor(RunOp("gelu", {T(DType::kI32, {1}, {2})}), DType::kF32, {1}, {1.9544997361036416},
               1e-6);
  ExpectErrorWith(
      [&] {
        RunOp("gelu", {x}, {{"approximate", std::string("fast")}});
      },
      "gelu: approximate must be 'none' or 'tanh', got 'fast'");
}

TEST(Unary, Bf16ComputesInFloatAndRoundsOnce) {
  // exp(1) = 2.71828...; bf16 near 2.7 is spaced 2^-6, so the result is 174/64 = 2.71875 exactly.
  ExpectTensor(RunOp("exp", {T(DType::kBF16, {1}, {1})}), DType::kBF16, {1}, {2.71875}, 0);
  // 1 + 2^-8 is a tie between bf16 neighbours 1 and 1+2^-7: ties go to even (1.0).
  ExpectTensor(RunOp("add", {T(DType::kBF16, {1}, {1}), T(DType::kBF16, {1}, {1.0 / 256})}),
               DType::kBF16, {1}, {1.0}, 0);
  // (1+2^-7) + 2^-8 is a tie again, now rounding up to the even 1+2^-6.
  ExpectTensor(
      RunOp("add", {T(DType::kBF16, {1}, {1 + 1.0 / 128}), T(DType::kBF16, {1}, {1.0 / 256})}),
      DType::kBF16, {1}, {1 + 1.0 / 64}, 0);
  // mul computes the exact float product then rounds: 3 * (1+2^-7) = 3.0234375 -> 3.03125 (spacing
  // 2^-6).
  ExpectTensor(RunOp("mul", {T(DType::kBF16, {1}, {3}), T(DType::kBF16, {1}, {1 + 1.0 / 128})}),
               DType::kBF16, {1}, {3.03125}, 0);
  ExpectTensor(RunOp("neg", {T(DType::kBF16, {2}, {1.5, -0.25})}), DType::kBF16, {2}, {-1.5, 0.25},
               0);
}

TEST(Unary, Bf16LoopsRoundBitExactlyLikeBFloat16) {
  // Every bf16 bit pattern (zeros, subnormals, infinities, NaNs) divided by 3, exponentiated and
  // negated: the kernels' vectorizable bf16 conversions must give the same bits as BFloat16's
  // constructor applied to the op's float result (exp computes in float with fast_math.h's exp).
  const int64_t n = 1 << 16;
  Tensor x = Tensor::empty(DType::kBF16, {n});
  for (int64_t i = 0; i < n; ++i) x.data<BFloat16>()[i].bits = static_cast<uint16_t>(i);
  const Tensor q = RunOp("div", {x, Scalar(DType::kBF16, 3)});
  const Tensor e = RunOp("exp", {x});
  const Tensor m = RunOp("neg", {x});
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x.data<BFloat16>()[i];
    bad += q.data<BFloat16>()[i].bits != BFloat16(v / 3.0f).bits;
    bad += e.data<BFloat16>()[i].bits != BFloat16(crucible_fast::exp_f32(v)).bits;
    bad += m.data<BFloat16>()[i].bits != BFloat16(-v).bits;
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------------
// Binary arithmetic: broadcasting and promotion

TEST(Binary, BroadcastShapes) {
  const Tensor a = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(RunOp("add", {a, T(DType::kF32, {3}, {10, 20, 30})}), DType::kF32, {2, 3},
               {11, 22, 33, 14, 25, 36});
  ExpectTensor(RunOp("add", {T(DType::kF32, {3}, {10, 20, 30}), a}), DType::kF32, {2, 3},
               {11, 22, 33, 14, 25, 36});
  ExpectTensor(RunOp("mul", {T(DType::kF32, {2, 1}, {1, 2}), T(DType::kF32, {1, 3}, {3, 4, 5})}),
               DType::kF32, {2, 3}, {3, 4, 5, 6, 8, 10});
  ExpectTensor(RunOp("sub", {a, Scalar(DType::kF32, 1)}), DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  ExpectTensor(RunOp("sub", {Scalar(DType::kF32, 1), a}), DType::kF32, {2, 3},
               {0, -1, -2, -3, -4, -5});
  ExpectTensor(RunOp("add", {Scalar(DType::kF32, 1), Scalar(DType::kF32, 2)}), DType::kF32, {},
               {3});
  ExpectTensor(RunOp("add", {T(DType::kF32, {1, 1}, {1}), T(DType::kF32, {1}, {2})}), DType::kF32,
               {1, 1}, {3});
  ExpectTensor(RunOp("add", {T(DType::kF32, {3, 1}, {1, 2, 3}), T(DType::kF32, {1}, {10})}),
               DType::kF32, {3, 1}, {11, 12, 13});
  ExpectErrorWith(
      [&] {
        RunOp("add", {a, T(DType::kF32, {2}, {1, 2})});
      },
      "add: shapes [2,3] and [2] cannot be broadcast");
}

TEST(Binary, TypePromotion) {
  ExpectTensor(RunOp("add", {T(DType::kU8, {2}, {200, 1}), T(DType::kI32, {2}, {100, -2})}),
               DType::kI32, {2}, {300, -1});
  ExpectTensor(RunOp("add", {T(DType::kI64, {2}, {1, 2}), T(DType::kF32, {2}, {0.5, 0.25})}),
               DType::kF32, {2}, {1.5, 2.25});
  // A 0-d float tensor raises the category: u8 + f32 scalar computes in f32 (no u8 truncation of
  // 0.5).
  ExpectTensor(RunOp("add", {T(DType::kU8, {2}, {1, 255}), Scalar(DType::kF32, 0.5)}), DType::kF32,
               {2}, {1.5, 255.5});
  // A 0-d tensor of the same category does not widen: i64 tensor + i32 scalar stays i64.
  ExpectTensor(RunOp("add", {T(DType::kI64, {1}, {5000000000.0}), Scalar(DType::kI32, 1)}),
               DType::kI64, {1}, {5000000001.0});
  // ... and an i64 scalar with a u8 tensor stays u8, wrapping.
  ExpectTensor(RunOp("add", {T(DType::kU8, {1}, {250}), Scalar(DType::kI64, 10)}), DType::kU8, {1},
               {4});
  ExpectTensor(RunOp("add", {T(DType::kBool, {2}, {1, 0}), T(DType::kU8, {2}, {1, 7})}), DType::kU8,
               {2}, {2, 7});
  ExpectTensor(RunOp("add", {T(DType::kBF16, {1}, {1.0078125}), T(DType::kF32, {1}, {0.001})}),
               DType::kF32, {1}, {1.0088125});
  ExpectTensor(RunOp("mul", {T(DType::kBF16, {2}, {2, 3}), T(DType::kI64, {2}, {3, 4})}),
               DType::kBF16, {2}, {6, 12}, 0);
  ExpectTensor(RunOp("maximum", {T(DType::kI32, {2}, {1, 5}), T(DType::kF64, {2}, {1.5, 2})}),
               DType::kF64, {2}, {1.5, 5});
}

TEST(Binary, IntegerWrapAround) {
  ExpectTensor(RunOp("add", {T(DType::kU8, {2}, {250, 255}), T(DType::kU8, {2}, {10, 1})}),
               DType::kU8, {2}, {4, 0});
  ExpectTensor(RunOp("sub", {T(DType::kU8, {2}, {3, 0}), T(DType::kU8, {2}, {5, 1})}), DType::kU8,
               {2}, {254, 255});
  ExpectTensor(RunOp("mul", {T(DType::kU8, {2}, {16, 200}), T(DType::kU8, {2}, {17, 2})}),
               DType::kU8, {2}, {16, 144});
  ExpectTensor(RunOp("add", {T(DType::kI32, {1}, {2147483647}), T(DType::kI32, {1}, {1})}),
               DType::kI32, {1}, {-2147483648.0});
  ExpectTensor(RunOp("mul", {T(DType::kI32, {1}, {65536}), T(DType::kI32, {1}, {65537})}),
               DType::kI32, {1}, {65536});
  ExpectTensor(
      RunOp("sub", {T(DType::kI64, {1}, {-9223372036854775807.0 - 1}), T(DType::kI64, {1}, {1})}),
      DType::kI64, {1}, {9223372036854775807.0});
}

TEST(Binary, BoolArithmetic) {
  const Tensor a = T(DType::kBool, {4}, {0, 0, 1, 1}), b = T(DType::kBool, {4}, {0, 1, 0, 1});
  ExpectTensor(RunOp("add", {a, b}), DType::kBool, {4}, {0, 1, 1, 1});
  ExpectTensor(RunOp("mul", {a, b}), DType::kBool, {4}, {0, 0, 0, 1});
  ExpectTensor(RunOp("maximum", {a, b}), DType::kBool, {4}, {0, 1, 1, 1});
  ExpectTensor(RunOp("minimum", {a, b}), DType::kBool, {4}, {0, 0, 0, 1});
  ExpectTensor(RunOp("div", {a, T(DType::kBool, {4}, {1, 1, 1, 1})}), DType::kF32, {4},
               {0, 0, 1, 1});
  ExpectErrorWith([&] { RunOp("sub", {a, b}); }, "sub: not supported for bool");
  ExpectErrorWith(
      [&] {
        RunOp("sub", {a, T(DType::kI32, {4}, {1, 1, 1, 1})});
      },
      "not supported for bool");
  ExpectErrorWith([&] { RunOp("pow", {a, b}); }, "pow: not supported for bool");
}

TEST(Binary, TrueDivision) {
  ExpectTensor(
      RunOp("div", {T(DType::kI32, {4}, {7, -7, 1, 0}), T(DType::kI32, {4}, {2, 2, 0, 0})}),
      DType::kF32, {4}, {3.5, -3.5, kInf, kNaN});
  ExpectTensor(RunOp("div", {T(DType::kF64, {2}, {1, 2}), T(DType::kF64, {2}, {3, 4})}),
               DType::kF64, {2}, {1.0 / 3, 0.5}, 1e-15);
  ExpectTensor(RunOp("div", {T(DType::kU8, {2}, {1, 3}), Scalar(DType::kI64, 2)}), DType::kF32, {2},
               {0.5, 1.5});
  ExpectTensor(RunOp("div", {T(DType::kBF16, {1}, {1}), T(DType::kBF16, {1}, {3})}), DType::kBF16,
               {1}, {0.333984375}, 0);
}

TEST(Binary, MaximumMinimumPropagateNaN) {
  const Tensor a = T(DType::kF32, {4}, {1, kNaN, 3, kNaN}),
               b = T(DType::kF32, {4}, {kNaN, 2, 1, kNaN});
  ExpectTensor(RunOp("maximum", {a, b}), DType::kF32, {4}, {kNaN, kNaN, 3, kNaN});
  ExpectTensor(RunOp("minimum", {a, b}), DType::kF32, {4}, {kNaN, kNaN, 1, kNaN});
  ExpectTensor(
      RunOp("maximum", {T(DType::kF32, {3}, {-kInf, 2, -1}), T(DType::kF32, {3}, {0, kInf, -2})}),
      DType::kF32, {3}, {0, kInf, -1});
  ExpectTensor(RunOp("minimum", {T(DType::kI32, {3}, {-5, 2, 7}), T(DType::kI32, {3}, {0, 2, 9})}),
               DType::kI32, {3}, {-5, 2, 7});
  ExpectTensor(RunOp("maximum", {T(DType::kU8, {2}, {200, 3}), T(DType::kU8, {2}, {100, 4})}),
               DType::kU8, {2}, {200, 4});
  ExpectTensor(RunOp("maximum", {T(DType::kBF16, {2}, {kNaN, 1}), T(DType::kBF16, {2}, {1, 2})}),
               DType::kBF16, {2}, {kNaN, 2});
}

TEST(Binary, Pow) {
  ExpectTensor(RunOp("pow", {T(DType::kF32, {3}, {2, 4, -8}), T(DType::kF32, {3}, {3, 0.5, 2})}),
               DType::kF32, {3}, {8, 2, 64});
  ExpectTensor(RunOp("pow", {T(DType::kF32, {2}, {-8, 0}), T(DType::kF32, {2}, {0.5, -1})}),
               DType::kF32, {2}, {kNaN, kInf});
  ExpectTensor(
      RunOp("pow", {T(DType::kI64, {5}, {3, 0, 2, -2, 7}), T(DType::kI64, {5}, {4, 0, 10, 3, 1})}),
      DType::kI64, {5}, {81, 1, 1024, -8, 7});
  // Negative integer exponents (an error in PyTorch) give the truncated real power.
  ExpectTensor(RunOp("pow", {T(DType::kI32, {5}, {2, 1, -1, -1, 0}),
                             T(DType::kI32, {5}, {-1, -5, -3, -2, -1})}),
               DType::kI32, {5}, {0, 1, -1, 1, 0});
  // Integer powers wrap: 2^9 = 512 = 0 mod 256; 3^20 mod 2^32 as a signed i32.
  ExpectTensor(RunOp("pow", {T(DType::kU8, {2}, {2, 3}), T(DType::kU8, {2}, {9, 5})}), DType::kU8,
               {2}, {0, 243});
  ExpectTensor(RunOp("pow", {T(DType::kI32, {1}, {3}), T(DType::kI32, {1}, {20})}), DType::kI32,
               {1}, {-808182895});
  ExpectTensor(RunOp("pow", {T(DType::kI64, {2}, {2, 3}), Scalar(DType::kF32, 0.5)}), DType::kF32,
               {2}, {std::sqrt(2.0), std::sqrt(3.0)});
  ExpectTensor(RunOp("pow", {T(DType::kI32, {3}, {2, 3, 4}), Scalar(DType::kI64, 2)}), DType::kI32,
               {3}, {4, 9, 16});
}

// ---------------------------------------------------------------------------------------------------
// Comparisons and where

TEST(Compare, AllSixWithNaN) {
  const Tensor a = T(DType::kF32, {4}, {1, 2, 3, kNaN}), b = T(DType::kF32, {4}, {2, 2, 2, kNaN});
  ExpectTensor(RunOp("eq", {a, b}), DType::kBool, {4}, {0, 1, 0, 0});
  ExpectTensor(RunOp("ne", {a, b}), DType::kBool, {4}, {1, 0, 1, 1});
  ExpectTensor(RunOp("lt", {a, b}), DType::kBool, {4}, {1, 0, 0, 0});
  ExpectTensor(RunOp("le", {a, b}), DType::kBool, {4}, {1, 1, 0, 0});
  ExpectTensor(RunOp("gt", {a, b}), DType::kBool, {4}, {0, 0, 1, 0});
  ExpectTensor(RunOp("ge", {a, b}), DType::kBool, {4}, {0, 1, 1, 0});
  // NaN against a number: false except ne.
  const Tensor n = Scalar(DType::kF32, kNaN);
  for (const char* op : {"eq", "lt", "le", "gt", "ge"}) {
    ExpectTensor(RunOp(op, {a, n}), DType::kBool, {4}, {0, 0, 0, 0});
  }
  ExpectTensor(RunOp("ne", {a, n}), DType::kBool, {4}, {1, 1, 1, 1});
}

TEST(Compare, PromotesOperandsFirst) {
  // Compared as f32, not as truncated integers: [1,2,3] > 2.5.
  ExpectTensor(RunOp("gt", {T(DType::kI64, {3}, {1, 2, 3}), Scalar(DType::kF32, 2.5)}),
               DType::kBool, {3}, {0, 0, 1});
  ExpectTensor(RunOp("eq", {T(DType::kI64, {2}, {2, 3}), Scalar(DType::kF32, 2.5)}), DType::kBool,
               {2}, {0, 0});
  // u8 255 against i32 -1 in i32.
  ExpectTensor(RunOp("lt", {T(DType::kI32, {2}, {-1, 300}), T(DType::kU8, {2}, {255, 255})}),
               DType::kBool, {2}, {1, 0});
  ExpectTensor(RunOp("eq", {T(DType::kBool, {3}, {1, 0, 1}), T(DType::kI32, {3}, {1, 0, 2})}),
               DType::kBool, {3}, {1, 1, 0});
  ExpectTensor(RunOp("le", {T(DType::kF32, {2, 1}, {1, 3}), T(DType::kBF16, {3}, {0, 1, 2})}),
               DType::kBool, {2, 3}, {0, 1, 1, 0, 0, 0});
  ExpectErrorWith(
      [] {
        RunOp("eq", {T(DType::kF32, {2}, {1, 2}), T(DType::kF32, {3}, {1, 2, 3})});
      },
      "cannot be broadcast");
}

TEST(Where, SelectsBroadcastsAndPromotes) {
  const Tensor c = T(DType::kBool, {2, 1}, {1, 0});
  ExpectTensor(RunOp("where", {c, T(DType::kF32, {3}, {1, 2, 3}),
                               T(DType::kF32, {2, 3}, {4, 5, 6, 7, 8, 9})}),
               DType::kF32, {2, 3}, {1, 2, 3, 7, 8, 9});
  // dtype = result_type(a, b): u8 tensor with an f32 0-d gives f32; cond does not take part.
  ExpectTensor(RunOp("where", {T(DType::kBool, {3}, {1, 0, 1}), T(DType::kU8, {3}, {1, 2, 3}),
                               Scalar(DType::kF32, 0.5)}),
               DType::kF32, {3}, {1, 0.5, 3});
  ExpectTensor(RunOp("where", {T(DType::kBool, {2}, {0, 1}), T(DType::kI32, {2}, {1, 2}),
                               T(DType::kI64, {2}, {-1, -2})}),
               DType::kI64, {2}, {-1, 2});
  ExpectTensor(RunOp("where", {Scalar(DType::kBool, 1), T(DType::kF32, {2}, {kNaN, 1}),
                               Scalar(DType::kF32, 0)}),
               DType::kF32, {2}, {kNaN, 1});
  ExpectTensor(RunOp("where", {T(DType::kBool, {2}, {1, 0}), T(DType::kBF16, {2}, {1.5, 2}),
                               T(DType::kBF16, {2}, {3, 4})}),
               DType::kBF16, {2}, {1.5, 4});
  ExpectErrorWith(
      [] {
        RunOp("where",
              {T(DType::kU8, {1}, {1}), T(DType::kF32, {1}, {1}), T(DType::kF32, {1}, {2})});
      },
      "where: condition must be bool, got u8");
  ExpectErrorWith(
      [] {
        RunOp("where", {T(DType::kBool, {2}, {1, 0}), T(DType::kF32, {3}, {1, 2, 3}),
                        Scalar(DType::kF32, 0)});
      },
      "cannot be broadcast");
}

// ---------------------------------------------------------------------------------------------------
// cast and clamp

TEST(Cast, ConvertsLikeTensorTo) {
  const Tensor x = T(DType::kF32, {5}, {-1.5, 0, 2.7, 300, kNaN});
  ExpectTensor(RunOp("cast", {x}, {{"dtype", DType::kI32}}), DType::kI32, {5}, {-1, 0, 2, 300, 0});
  ExpectTensor(RunOp("cast", {x}, {{"dtype", DType::kBool}}), DType::kBool, {5}, {1, 0, 1, 1, 1});
  ExpectTensor(RunOp("cast", {T(DType::kI32, {2}, {256, 257})}, {{"dtype", DType::kU8}}),
               DType::kU8, {2}, {0, 1});
  ExpectTensor(RunOp("cast", {T(DType::kF32, {1}, {1.0 + 3.0 / 512})}, {{"dtype", DType::kBF16}}),
               DType::kBF16, {1}, {1.0 + 1.0 / 128}, 0);
  // Casting to the same dtype hands back the operand (no copy), like torch's .to().
  Tensor same = RunOp("cast", {x}, {{"dtype", DType::kF32}});
  EXPECT_EQ(same.storage(), x.storage());
  // Non-contiguous input.
  ExpectTensor(RunOp("cast", {T(DType::kF64, {2, 2}, {1, 2, 3, 4}).transpose(0, 1)},
                     {{"dtype", DType::kI64}}),
               DType::kI64, {2, 2}, {1, 3, 2, 4});
  ExpectErrorWith([&] { RunOp("cast", {x}); }, "cast: missing attribute 'dtype'");
  ExpectErrorWith(
      [&] {
        RunOp("cast", {x}, {{"dtype", int64_t{3}}});
      },
      "attribute 'dtype' must be dtype");
}

TEST(Clamp, BoundsAndNaN) {
  const Tensor x = T(DType::kF32, {5}, {-2, -0.5, 0.5, 2, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"min", -1.0}, {"max", 1.0}}), DType::kF32, {5},
               {-1, -0.5, 0.5, 1, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"min", 0.0}}), DType::kF32, {5}, {0, 0, 0.5, 2, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"max", 0.0}}), DType::kF32, {5}, {-2, -0.5, 0, 0, kNaN});
  // An int given for a float attribute is accepted.
  ExpectTensor(RunOp("clamp", {x}, {{"min", int64_t{1}}}), DType::kF32, {5}, {1, 1, 1, 2, kNaN});
  // min > max: everything becomes max, as min(max(x, lo), hi) does.
  ExpectTensor(RunOp("clamp", {x}, {{"min", 3.0}, {"max", 1.0}}), DType::kF32, {5},
               {1, 1, 1, 1, kNaN});
  // NaN bounds as PyTorch 1.13: a lone NaN bound is no bound; with both bounds given, either one
  // NaN makes every element NaN.
  ExpectTensor(RunOp("clamp", {x}, {{"min", kNaN}}), DType::kF32, {5}, {-2, -0.5, 0.5, 2, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"max", kNaN}}), DType::kF32, {5}, {-2, -0.5, 0.5, 2, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"min", kNaN}, {"max", 1.0}}), DType::kF32, {5},
               {kNaN, kNaN, kNaN, kNaN, kNaN});
  ExpectTensor(RunOp("clamp", {x}, {{"min", 0.0}, {"max", kNaN}}), DType::kF32, {5},
               {kNaN, kNaN, kNaN, kNaN, kNaN});
  ExpectTensor(RunOp("clamp", {T(DType::kF64, {2}, {-3, 3})}, {{"max", kNaN}}), DType::kF64, {2},
               {-3, 3});
}

TEST(Clamp, IntegerBf16AndErrors) {
  ExpectTensor(RunOp("clamp", {T(DType::kI32, {4}, {-5, 0, 3, 9})}, {{"min", -1.0}, {"max", 4.0}}),
               DType::kI32, {4}, {-1, 0, 3, 4});
  // Bounds are converted to the dtype: 2.7 truncates to 2; u8 bounds saturate (-5 means no lower
  // bound).
  ExpectTensor(RunOp("clamp", {T(DType::kI64, {3}, {1, 2, 3})}, {{"max", 2.7}}), DType::kI64, {3},
               {1, 2, 2});
  ExpectTensor(RunOp("clamp", {T(DType::kU8, {3}, {0, 100, 255})}, {{"min", -5.0}, {"max", 300.0}}),
               DType::kU8, {3}, {0, 100, 255});
  ExpectTensor(RunOp("clamp", {T(DType::kU8, {3}, {0, 100, 255})}, {{"min", 10.0}, {"max", 200.0}}),
               DType::kU8, {3}, {10, 100, 200});
  // bf16: the bound 1.001 rounds to bf16 1.0 first.
  ExpectTensor(RunOp("clamp", {T(DType::kBF16, {2}, {0.5, 2})}, {{"max", 1.001}}), DType::kBF16,
               {2}, {0.5, 1}, 0);
  const Tensor x = T(DType::kF32, {1}, {1});
  ExpectErrorWith([&] { RunOp("clamp", {x}); },
                  "clamp: needs at least one of the attributes 'min' and 'max'");
  ExpectErrorWith(
      [] {
        RunOp("clamp", {T(DType::kBool, {1}, {1})}, {{"min", 0.0}});
      },
      "clamp: not supported for bool");
  ExpectErrorWith([] { RunOp("clamp", {T(DType::kI32, {1}, {1})}, {{"min", kNaN}}); }, "NaN bound");
  ExpectErrorWith(
      [&] {
        RunOp("clamp", {x}, {{"min", std::string("a")}});
      },
      "attribute 'min' must be float");
  ExpectErrorWith([&] { RunOp("clamp", {x}, {{"low", 1.0}}); }, "unknown attribute 'low'");
}

// ---------------------------------------------------------------------------------------------------
// Layouts: zero-size, size-1, non-contiguous operands

TEST(Layout, ZeroSizeDimensions) {
  const Tensor z = Tensor::empty(DType::kF32, {0, 3});
  ExpectTensor(RunOp("add", {z, T(DType::kF32, {3}, {1, 2, 3})}), DType::kF32, {0, 3}, {});
  ExpectTensor(RunOp("add", {z, Scalar(DType::kI64, 1)}), DType::kF32, {0, 3}, {});
  ExpectTensor(RunOp("exp", {z}), DType::kF32, {0, 3}, {});
  ExpectTensor(RunOp("neg", {Tensor::empty(DType::kU8, {0, 3})}), DType::kU8, {0, 3}, {});
  ExpectTensor(RunOp("lt", {z, z}), DType::kBool, {0, 3}, {});
  ExpectTensor(RunOp("where", {Tensor::empty(DType::kBool, {0, 1}), z, Scalar(DType::kF32, 0)}),
               DType::kF32, {0, 3}, {});
  ExpectTensor(RunOp("clamp", {z}, {{"min", 0.0}}), DType::kF32, {0, 3}, {});
  ExpectTensor(RunOp("cast", {z}, {{"dtype", DType::kI32}}), DType::kI32, {0, 3}, {});
  // [1] broadcasts against 0; [2] does not.
  ExpectTensor(RunOp("mul", {T(DType::kF32, {1}, {2}), Tensor::empty(DType::kF32, {0})}),
               DType::kF32, {0}, {});
  ExpectErrorWith([&] { RunOp("add", {z, T(DType::kF32, {2}, {1, 2})}); }, "cannot be broadcast");
}

TEST(Layout, NonContiguousOperands) {
  const Tensor base = T(DType::kF32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor t = base.transpose(0, 1);  // [4,3]: 0 4 8 / 1 5 9 / 2 6 10 / 3 7 11
  ExpectTensor(RunOp("add", {t, T(DType::kF32, {4, 3}, {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3})}),
               DType::kF32, {4, 3}, {0, 4, 8, 2, 6, 10, 4, 8, 12, 6, 10, 14});
  ExpectTensor(RunOp("neg", {t}), DType::kF32, {4, 3},
               {-0.0, -4, -8, -1, -5, -9, -2, -6, -10, -3, -7, -11});
  ExpectTensor(RunOp("exp", {t.slice(0, 0, 1)}), DType::kF32, {1, 3},
               {1, std::exp(4.0), std::exp(8.0)});
  // Stepped slice with an offset: columns 1 and 3 -> [[1,3],[5,7],[9,11]].
  const Tensor s = base.slice(1, 1, 4, 2);
  ExpectTensor(RunOp("mul", {s, s}), DType::kF32, {3, 2}, {1, 9, 25, 49, 81, 121});
  ExpectTensor(RunOp("sub", {s, base.slice(1, 0, 2)}), DType::kF32, {3, 2}, {1, 2, 1, 2, 1, 2});
  // Expanded operand (stride 0 in a dimension that is not leading).
  const Tensor e = T(DType::kI32, {3, 1}, {1, 2, 3}).expand(std::vector<int64_t>{3, 4});
  ExpectTensor(RunOp("add", {e, T(DType::kI32, {4}, {0, 10, 20, 30})}), DType::kI32, {3, 4},
               {1, 11, 21, 31, 2, 12, 22, 32, 3, 13, 23, 33});
  ExpectTensor(RunOp("maximum", {t, e.transpose(0, 1)}), DType::kF32, {4, 3},
               {1, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  ExpectTensor(RunOp("gt", {t, s.transpose(0, 1).slice(0, 0, 1)}), DType::kBool, {4, 3},
               {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  ExpectTensor(
      RunOp("where", {RunOp("gt", {t, Scalar(DType::kF32, 5)}), t, Scalar(DType::kF32, -1)}),
      DType::kF32, {4, 3}, {-1, -1, 8, -1, -1, 9, -1, 6, 10, -1, 7, 11});
  // The operands are never written.
  ExpectTensor(base, DType::kF32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
}

TEST(Layout, OperandsAreNeverWritten) {
  const Tensor a = T(DType::kU8, {3}, {1, 2, 3});
  const Tensor out = RunOp("add", {a, a});
  EXPECT_NE(out.storage(), a.storage());
  ExpectTensor(a, DType::kU8, {3}, {1, 2, 3});
  ExpectTensor(out, DType::kU8, {3}, {2, 4, 6});
  EXPECT_TRUE(out.is_contiguous());
}

// ---------------------------------------------------------------------------------------------------
// Large tensors: the parallel chunk path (one long row) and the parallel row path (broadcast rows).

std::vector<float> Iota(int64_t n, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) * scale + shift;
  return v;
}

Tensor FromFloats(const std::vector<float>& v, Shape shape) {
  Tensor t = Tensor::empty(DType::kF32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

TEST(Large, ContiguousAddMatchesReferenceLoop) {
  const int64_t n = (int64_t{1} << 20) + 7;  // not a multiple of any chunk size
  const std::vector<float> a = Iota(n, 0.5f, -3.f), b = Iota(n + 13, 0.25f, 1.f);
  const std::vector<float> b_n(b.begin() + 13, b.end());
  const Tensor out = RunOp("add", {FromFloats(a, {n}), FromFloats(b_n, {n})});
  ASSERT_EQ(out.numel(), n);
  const float* p = out.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += p[i] != a[i] + b_n[i];
  EXPECT_EQ(bad, 0);
}

TEST(Large, BroadcastRowAndColumnMatchReferenceLoop) {
  const int64_t rows = 2048, cols = 512;
  const std::vector<float> a = Iota(rows * cols, 1.f, 0.f), row = Iota(cols, 0.125f, 5.f),
                           col = Iota(rows, 2.f, 0.f);
  const Tensor ta = FromFloats(a, {rows, cols});
  const Tensor by_row = RunOp("add", {ta, FromFloats(row, {cols})});
  const Tensor by_row_2d = RunOp("add", {ta, FromFloats(row, {1, cols})});
  const Tensor by_col = RunOp("mul", {ta, FromFloats(col, {rows, 1})});
  // Transposed operand: the strided fallback, still parallel over rows.
  const Tensor transposed = RunOp("sub", {ta, ta.transpose(0, 1).contiguous().transpose(0, 1)});
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      bad += by_row.data<float>()[i] != a[i] + row[c];
      bad += by_row_2d.data<float>()[i] != a[i] + row[c];
      bad += by_col.data<float>()[i] != a[i] * col[r];
      bad += transposed.data<float>()[i] != 0.f;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(Large, U8WrapAndCompareOnLongRows) {
  const int64_t n = int64_t{1} << 20;
  Tensor a = Tensor::empty(DType::kU8, {n}), b = Tensor::empty(DType::kU8, {n});
  for (int64_t i = 0; i < n; ++i) {
    a.data<uint8_t>()[i] = static_cast<uint8_t>(i * 31);
    b.data<uint8_t>()[i] = static_cast<uint8_t>(i * 17 + 3);
  }
  const Tensor sum = RunOp("add", {a, b}), lt = RunOp("lt", {a, b});
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t x = a.data<uint8_t>()[i], y = b.data<uint8_t>()[i];
    bad += sum.data<uint8_t>()[i] != static_cast<uint8_t>(x + y);
    bad += lt.data<bool>()[i] != (x < y);
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------------
// Type rules on their own (what the graph builder and verifier see)

TEST(TypeRules, InferWithoutData) {
  const OpRegistry& reg = OpRegistry::global();
  auto infer = [&](const char* op, std::vector<TensorType> in, Attrs attrs = {}) {
    return infer_type(reg.get(op), in, attrs);
  };
  EXPECT_EQ(infer("add", {{DType::kU8, {4, 1}}, {DType::kI32, {3}}}),
            (TensorType{DType::kI32, {4, 3}}));
  EXPECT_EQ(infer("div", {{DType::kI64, {2}}, {DType::kI64, {}}}), (TensorType{DType::kF32, {2}}));
  EXPECT_EQ(infer("div", {{DType::kF64, {2}}, {DType::kI64, {}}}), (TensorType{DType::kF64, {2}}));
  EXPECT_EQ(infer("exp", {{DType::kBF16, {5}}}), (TensorType{DType::kBF16, {5}}));
  EXPECT_EQ(infer("exp", {{DType::kU8, {5}}}), (TensorType{DType::kF32, {5}}));
  EXPECT_EQ(infer("neg", {{DType::kI32, {}}}), (TensorType{DType::kI32, {}}));
  EXPECT_EQ(infer("ge", {{DType::kF64, {2, 1}}, {DType::kU8, {1, 5}}}),
            (TensorType{DType::kBool, {2, 5}}));
  EXPECT_EQ(infer("where", {{DType::kBool, {3, 1}}, {DType::kI32, {1}}, {DType::kF32, {}}}),
            (TensorType{DType::kF32, {3, 1}}));
  EXPECT_EQ(infer("cast", {{DType::kF32, {2}}}, {{"dtype", DType::kU8}}),
            (TensorType{DType::kU8, {2}}));
  EXPECT_EQ(infer("clamp", {{DType::kU8, {2}}}, {{"max", int64_t{3}}}),
            (TensorType{DType::kU8, {2}}));
  ExpectErrorWith([&] { infer("add", {{DType::kF32, {2}}}); }, "add: expects 2 operands, got 1");
  ExpectErrorWith(
      [&] {
        infer("where", {{DType::kBool, {2}}, {DType::kF32, {2}}});
      },
      "where: expects 3 operands");
  ExpectErrorWith(
      [&] {
        infer("add", {{DType::kF32, {2, 3}}, {DType::kF32, {3, 2}}});
      },
      "cannot be broadcast");
  ExpectErrorWith([&] { infer("neg", {{DType::kBool, {2}}}); }, "neg: not supported for bool");
  ExpectErrorWith(
      [&] {
        infer("gelu", {{DType::kF32, {2}}}, {{"approximate", std::string("erf")}});
      },
      "approximate must be");
}

TEST(Registry, EveryElementwiseOpIsRegistered) {
  for (const char* op : {"neg", "abs",  "relu",    "exp",     "log",        "sqrt", "rsqrt", "sin",
                         "cos", "tanh", "sigmoid", "erf",     "reciprocal", "gelu", "add",   "sub",
                         "mul", "div",  "maximum", "minimum", "pow",        "eq",   "ne",    "lt",
                         "le",  "gt",   "ge",      "where",   "cast",       "clamp"}) {
    EXPECT_NE(OpRegistry::global().find(op), nullptr) << op;
  }
}

// Short rows ([R, n] with n < 256) run regrouped into longer rows with broadcast rows tiled; every
// row count (multiples of the regrouping and not), row length, operand pattern and dtype must give
// exactly what the flat path gives, NaN included.
TEST(ElementwiseShortRows, RegroupedRowsMatchElementByElement) {
  for (DType dt : {DType::kF32, DType::kI32, DType::kBF16, DType::kF64}) {
    for (int64_t n : {1, 2, 3, 7, 8, 17, 100, 255}) {
      for (int64_t rows : {1, 2, 5, 300, 1031, 4099}) {
        for (int pattern = 0; pattern < 4; ++pattern) {
          // 0: dense op row, 1: row op dense, 2: dense op scalar, 3: dense op dense.
          const Shape dense{rows, n};
          const Shape a_shape = pattern == 1 ? Shape{1, n} : dense;
          const Shape b_shape = pattern == 0 ? Shape{1, n} : pattern == 2 ? Shape{1, 1} : dense;
          auto fill = [&](const Shape& shape, int salt) {
            std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
            for (size_t i = 0; i < v.size(); ++i)
              v[i] = static_cast<double>((static_cast<int64_t>(i) * 7 + salt * 13) % 23 - 11);
            if (is_floating(dt) && v.size() > 3) v[3] = NAN;
            return Tensor::from_doubles(dt, shape, v);
          };
          const Tensor a = fill(a_shape, 1), b = fill(b_shape, 2);
          for (const char* op : {"add", "maximum", "mul"}) {
            SCOPED_TRACE(
                fmt::format("{} {} rows={} n={} pattern={}", op, dtype_name(dt), rows, n, pattern));
            const Tensor got = run_op(op, std::vector<Tensor>{a, b});
            ASSERT_EQ(got.shape(), dense);
            // Reference: both operands materialized dense, which coalesce to one flat row and
            // never take the regrouped path; the same scalar code, so bit for bit.
            const Tensor want = run_op(op, std::vector<Tensor>{a.expand(dense).contiguous(),
                                                               b.expand(dense).contiguous()});
            const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
            for (size_t i = 0; i < g.size(); ++i) {
              if (std::isnan(w[i]) ? !std::isnan(g[i]) : g[i] != w[i])
                FAIL() << "element " << i << ": " << g[i] << " != " << w[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace crucible
