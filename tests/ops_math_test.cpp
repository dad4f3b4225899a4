// The elementwise ops added for ONNX import: rounding, sign, trigonometry, isnan/isinf, logical
// ops and mod, on hand values, every dtype they take, NaN/inf, empty and strided operands, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;
using namespace testing::op_helpers;

const DType kFloats[] = {DType::kF64, DType::kF32, DType::kBF16};
const DType kInts[] = {DType::kI64, DType::kI32, DType::kU8};

TEST(MathOps, FloorCeilRoundHalfToEven) {
  const std::vector<double> x = {0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 3.2, kNaN, kInf, -kInf};
  for (DType t : kFloats) {
    const Tensor in = T(t, {10}, x);
    ExpectTensor(RunOp("round", {in}), t, {10}, {0, 2, 2, -0.0, -2, -3, 3, kNaN, kInf, -kInf});
    ExpectTensor(RunOp("floor", {in}), t, {10}, {0, 1, 2, -1, -2, -3, 3, kNaN, kInf, -kInf});
    ExpectTensor(RunOp("ceil", {in}), t, {10}, {1, 2, 3, -0.0, -1, -2, 4, kNaN, kInf, -kInf});
  }
  EXPECT_TRUE(std::signbit(RunOp("round", {T(DType::kF64, {1}, {-0.4})}).get(0)));
  // Integers keep their values and dtype.
  for (DType t : kInts) {
    for (const char* op : {"floor", "ceil", "round"}) {
      ExpectTensor(RunOp(op, {T(t, {3}, {0, 7, 200})}), t, {3}, {0, 7, 200});
    }
  }
  ExpectTensor(RunOp("round", {T(DType::kI32, {2}, {-5, 2147483647.0})}), DType::kI32, {2},
               {-5, 2147483647.0});
  for (const char* op : {"floor", "ceil", "round", "sign"}) {
    ExpectError(op, {T(DType::kBool, {1}, {1})}, {}, std::string(op) + ": not supported for bool");
  }
}

TEST(MathOps, SignKeepsNaNAndDtype) {
  for (DType t : kFloats) {
    ExpectTensor(RunOp("sign", {T(t, {6}, {-2.5, 0, -0.0, 3, kNaN, -kInf})}), t, {6},
                 {-1, 0, 0, 1, kNaN, -1});
  }
  ExpectTensor(RunOp("sign", {T(DType::kI64, {3}, {-9, 0, 4})}), DType::kI64, {3}, {-1, 0, 1});
  ExpectTensor(RunOp("sign", {T(DType::kI32, {2}, {-2147483648.0, 5})}), DType::kI32, {2}, {-1, 1});
  ExpectTensor(RunOp("sign", {T(DType::kU8, {2}, {0, 255})}), DType::kU8, {2}, {0, 1});
}

double Libm(const std::string& op, double v) {
  if (op == "tan") return std::tan(v);
  if (op == "asin") return std::asin(v);
  if (op == "acos") return std::acos(v);
  if (op == "atan") return std::atan(v);
  if (op == "sinh") return std::sinh(v);
  if (op == "cosh") return std::cosh(v);
  if (op == "asinh") return std::asinh(v);
  if (op == "acosh") return std::acosh(v);
  return std::atanh(v);
}

// The values libm gives, NaN outside the domain (asin(2), acosh(0.5)), inf at atanh(1).
TEST(MathOps, TrigonometryMatchesLibmInEveryFloatDtype) {
  const std::vector<double> x = {-0.75, 0, 0.5, 0.999, 1, 1.5, 2, 10, kNaN, kInf};
  for (const char* op :
       {"tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}) {
    for (DType t : kFloats) {
      const Tensor in = T(t, {10}, x);
      std::vector<double> want;
      for (int64_t i = 0; i < 10; ++i) want.push_back(Libm(op, in.get(i)));
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(t)));
      ExpectTensor(RunOp(op, {in}), t, {10}, want,
                   t == DType::kBF16  ? 1e-2
                   : t == DType::kF32 ? 1e-6
                                      : 1e-15);
    }
    // Integers and bool compute in f32.
    ExpectTensor(RunOp(op, {T(DType::kI32, {1}, {1})}), DType::kF32, {1}, {Libm(op, 1)});
    ExpectTensor(RunOp(op, {T(DType::kBool, {1}, {0})}), DType::kF32, {1}, {Libm(op, 0)});
  }
  EXPECT_TRUE(std::isnan(RunOp("asin", {T(DType::kF64, {1}, {2})}).get(0)));
  EXPECT_EQ(RunOp("atanh", {T(DType::kF64, {1}, {-1})}).get(0), -kInf);
}

TEST(MathOps, IsNanIsInfWithDetectAttributes) {
  const std::vector<double> x = {1, kNaN, kInf, -kInf, 0};
  for (DType t : kFloats) {
    const Tensor in = T(t, {5}, x);
    ExpectTensor(RunOp("isnan", {in}), DType::kBool, {5}, {0, 1, 0, 0, 0});
    ExpectTensor(RunOp("isinf", {in}), DType::kBool, {5}, {0, 0, 1, 1, 0});
    ExpectTensor(RunOp("isinf", {in}, {{"detect_negative", false}}), DType::kBool, {5},
                 {0, 0, 1, 0, 0});
    ExpectTensor(RunOp("isinf", {in}, {{"detect_positive", false}}), DType::kBool, {5},
                 {0, 0, 0, 1, 0});
    ExpectTensor(RunOp("isinf", {in}, {{"detect_positive", false}, {"detect_negative", false}}),
                 DType::kBool, {5}, {0, 0, 0, 0, 0});
  }
  for (DType t : {DType::kI64, DType::kI32, DType::kU8, DType::kBool}) {
    ExpectTensor(RunOp("isnan", {T(t, {2}, {0, 1})}), DType::kBool, {2}, {0, 0});
    ExpectTensor(RunOp("isinf", {T(t, {2}, {0, 1})}), DType::kBool, {2}, {0, 0});
  }
  ExpectError("isinf", {T(DType::kF32, {1}, {1})}, {{"detect_positive", int64_t{1}}},
              "detect_positive");
}

TEST(MathOps, LogicalOpsBroadcastAnyDtypes) {
  const Tensor a = T(DType::kBool, {2, 1}, {0, 1});
  const Tensor b = T(DType::kBool, {3}, {0, 1, 1});
  ExpectTensor(RunOp("logical_and", {a, b}), DType::kBool, {2, 3}, {0, 0, 0, 0, 1, 1});
  ExpectTensor(RunOp("logical_or", {a, b}), DType::kBool, {2, 3}, {0, 1, 1, 1, 1, 1});
  ExpectTensor(RunOp("logical_xor", {a, b}), DType::kBool, {2, 3}, {0, 1, 1, 1, 0, 0});
  ExpectTensor(RunOp("logical_not", {b}), DType::kBool, {3}, {1, 0, 0});
  // Other dtypes: nonzero is true, NaN too.
  const Tensor f = T(DType::kF64, {4}, {0, -0.0, kNaN, 2});
  ExpectTensor(RunOp("logical_not", {f}), DType::kBool, {4}, {1, 1, 0, 0});
  ExpectTensor(RunOp("logical_and", {f, T(DType::kU8, {4}, {1, 1, 1, 0})}), DType::kBool, {4},
               {0, 0, 1, 0});
  ExpectTensor(RunOp("logical_xor", {T(DType::kBF16, {1}, {0.5}), T(DType::kI32, {}, {0})}),
               DType::kBool, {1}, {1});
  ExpectError("logical_or", {a, T(DType::kBool, {3, 1}, {1, 1, 1})}, {}, "cannot be broadcast");
}

TEST(MathOps, ModIntegerTakesTheDivisorsSignFmodTheDividends) {
  for (DType t : {DType::kI64, DType::kI32}) {
    const Tensor a = T(t, {6}, {-7, 7, 7, -7, 6, 5});
    const Tensor b = T(t, {6}, {3, -3, 3, -3, 3, 0});
    ExpectTensor(RunOp("mod", {a, b}), t, {6}, {2, -2, 1, -1, 0, 0});
    ExpectTensor(RunOp("mod", {a, b}, {{"fmod", true}}), t, {6}, {-1, 1, 1, -1, 0, 0});
  }
  // The one quotient that overflows (INT_MIN / -1) gives 0 instead of trapping.
  ExpectTensor(RunOp("mod", {T(DType::kI32, {1}, {-2147483648.0}), T(DType::kI32, {1}, {-1})}),
               DType::kI32, {1}, {0});
  ExpectTensor(RunOp("mod", {T(DType::kU8, {3}, {250, 7, 9}), T(DType::kU8, {3}, {7, 0, 9})}),
               DType::kU8, {3}, {5, 0, 0});
  ExpectError("mod", {T(DType::kBool, {1}, {1}), T(DType::kBool, {1}, {1})}, {},
              "mod: not supported for bool");
}

// trunc_div rounds toward zero in the operands' own type: int64 quotients past 2^53 are exact
// (through f64 they were rounded), a divisor of 0 gives 0 and -1 negates with wrapping, as mod.
TEST(MathOps, TruncDivIsExactForEveryInt64) {
  const std::vector<int64_t> a = {
      (int64_t{1} << 53) + 1, (int64_t{1} << 62) + 1, -7, 7, std::numeric_limits<int64_t>::min(), 5,
      9007199254740993};
  const std::vector<int64_t> b = {1, 3, 2, -2, -1, 0, 2};
  Tensor ta = Tensor::empty(DType::kI64, {7}), tb = Tensor::empty(DType::kI64, {7});
  std::copy(a.begin(), a.end(), ta.data<int64_t>());
  std::copy(b.begin(), b.end(), tb.data<int64_t>());
  const Tensor q = RunOp("trunc_div", {ta, tb});
  ASSERT_EQ(q.dtype(), DType::kI64);
  const std::vector<int64_t> want = {
      (int64_t{1} << 53) + 1, 1537228672809129301, -3, -3, std::numeric_limits<int64_t>::min(), 0,
      4503599627370496};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q.data<int64_t>()[i], want[i]) << i;
  ExpectTensor(RunOp("trunc_div", {T(DType::kU8, {3}, {250, 7, 9}), T(DType::kU8, {3}, {7, 0, 2})}),
               DType::kU8, {3}, {35, 0, 4});
  for (DType t : kFloats) {
    ExpectTensor(RunOp("trunc_div", {T(t, {3}, {-7.5, 7.5, 1}), T(t, {3}, {2, 2, 0})}), t, {3},
                 {-3, 3, kInf});
  }
  ExpectError("trunc_div", {T(DType::kBool, {1}, {1}), T(DType::kBool, {1}, {1})}, {},
              "trunc_div: not supported for bool");
}

TEST(MathOps, ModFloatAndPromotion) {
  for (DType t : kFloats) {
    const Tensor a = T(t, {7}, {5.5, -5.5, 5.5, -5.5, 1, kInf, kNaN});
    const Tensor b = T(t, {7}, {2, 2, -2, -2, 0, 2, 2});
    ExpectTensor(RunOp("mod", {a, b}), t, {7}, {1.5, 0.5, -0.5, -1.5, kNaN, kNaN, kNaN});
    ExpectTensor(RunOp("mod", {a, b}, {{"fmod", true}}), t, {7},
                 {1.5, -1.5, 1.5, -1.5, kNaN, kNaN, kNaN});
  }
  // i32 with an f32 0-d: f32, as add promotes; broadcasting.
  ExpectTensor(RunOp("mod", {T(DType::kI32, {2, 1}, {7, -7}), T(DType::kF32, {}, {2.5})}),
               DType::kF32, {2, 1}, {2, 0.5});
  Attrs none;
  const std::vector<TensorType> u8_and_i64 = {{DType::kU8, {2}}, {DType::kI64, {}}};
  EXPECT_EQ(infer_type(OpRegistry::global().get("mod"), u8_and_i64, none),
            (TensorType{DType::kU8, {2}}));
}

TEST(MathOps, ZeroSizeAndNonContiguousOperands) {
  const Tensor z = Tensor::empty(DType::kF64, {0, 3});
  for (const char* op :
       {"floor", "ceil", "round", "sign", "tan", "acosh", "isnan", "isinf", "logical_not"}) {
    EXPECT_EQ(RunOp(op, {z}).numel(), 0) << op;
    EXPECT_EQ(shape_str(RunOp(op, {z}).shape()), "[0,3]") << op;
  }
  for (const char* op : {"mod", "logical_and", "logical_or", "logical_xor"}) {
    EXPECT_EQ(shape_str(RunOp(op, {z, T(DType::kF64, {3}, {1, 2, 3})}).shape()), "[0,3]") << op;
  }
  // A transposed and a stepped operand.
  const Tensor base = T(DType::kF64, {2, 3}, {-1.5, 0.5, 2.5, 3, -4, kNaN});
  const Tensor t = base.transpose(0, 1);  // -1.5 3 / 0.5 -4 / 2.5 NaN
  ExpectTensor(RunOp("round", {t}), DType::kF64, {3, 2}, {-2, 3, 0, -4, 2, kNaN});
  ExpectTensor(RunOp("sign", {t}), DType::kF64, {3, 2}, {-1, 1, 1, -1, 1, kNaN});
  ExpectTensor(RunOp("isnan", {t}), DType::kBool, {3, 2}, {0, 0, 0, 0, 0, 1});
  ExpectTensor(RunOp("mod", {t, T(DType::kF64, {2}, {2, -2})}), DType::kF64, {3, 2},
               {0.5, -1, 0.5, -0.0, 0.5, kNaN});
  const Tensor s = base.slice(1, 0, 3, 2);  // -1.5 2.5 / 3 NaN
  ExpectTensor(RunOp("logical_and", {s, t.slice(0, 0, 2)}), DType::kBool, {2, 2}, {1, 1, 1, 1});
  ExpectTensor(RunOp("atan", {s}), DType::kF64, {2, 2},
               {std::atan(-1.5), std::atan(2.5), std::atan(3.0), kNaN}, 1e-15);
}

}  // namespace
}  // namespace crucible
