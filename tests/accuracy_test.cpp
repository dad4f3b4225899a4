// The accuracy rule on crafted tensors: allclose against eager, the RMSE-vs-fp64 fallback
// (including the case that must pass: farther from eager than tol but closer to fp64 than eager),
// exact integer comparison, NaN handling, cosine mode, and the recorded figures.
#include "accuracy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace crucible {
namespace {

using testing::T;

std::vector<double> ramp(int n, double scale) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * (i % 17 - 8);
  return v;
}

TEST(Accuracy, WithinToleranceOfEagerPasses) {
  Tensor ref = T(DType::kF32, {3}, {1.0, 2.0, -3.0});
  Tensor res = T(DType::kF32, {3}, {1.00005, 2.0, -3.0002});
  auto a = compare_output(res, ref, ref.to(DType::kF64), {});
  EXPECT_TRUE(a.passed);
  EXPECT_EQ(a.mismatches, 0);
  EXPECT_EQ(a.first_mismatch, -1);
  EXPECT_NEAR(a.max_abs_err, 0.0002, 1e-6);
}

TEST(Accuracy, FartherFromEagerThanTolButCloserToFp64ThanEagerPasses) {
  // fp64 truth; eager carries an error of 3e-3 everywhere; the compiled result is exact.
  const int n = 2000;
  std::vector<double> truth = ramp(n, 0.5), eager(n), compiled = truth;
  for (int i = 0; i < n; ++i) eager[i] = truth[i] + 3e-3;
  auto a = compare_output(T(DType::kF32, {n}, compiled), T(DType::kF32, {n}, eager),
                          T(DType::kF64, {n}, truth), {});
  EXPECT_GT(a.mismatches, 0);  // allclose with eager fails...
  EXPECT_LT(a.rmse_vs_fp64, a.rmse_eager_vs_fp64);
  EXPECT_TRUE(a.passed);  // ...but it is nearer the truth than eager is
}

// A training step's rule: atol is tol times the step's scale. A gradient of 1e-3 doubled by a
// wrong backward passes an absolute 1e-2 and fails at the scale of a step whose outputs are
// ~0.05; a gradient that is zero in exact arithmetic, rounding noise on both sides, passes.
TEST(Accuracy, AScaledToleranceJudgesSmallTensorsAtTheStepsScale) {
  const int n = 64;
  std::vector<double> grad(n), doubled(n), noise(n, 0.0), other(n);
  for (int i = 0; i < n; ++i) {
    grad[i] = 1e-3 * (1 + i % 5);
    doubled[i] = 2 * grad[i];
    other[i] = 3e-15 * (i % 3 - 1);
  }
  const Tensor g = T(DType::kF32, {n}, grad), d = T(DType::kF32, {n}, doubled);
  AccuracyOptions absolute{1e-2};
  EXPECT_TRUE(compare_output(d, g, T(DType::kF64, {n}, grad), absolute).passed);
  AccuracyOptions scaled{1e-2};
  scaled.scale = 0.05;
  EXPECT_FALSE(compare_output(d, g, T(DType::kF64, {n}, grad), scaled).passed);
  EXPECT_TRUE(compare_output(T(DType::kF32, {n}, other), T(DType::kF32, {n}, noise),
                             T(DType::kF64, {n}, noise), scaled)
                  .passed);
}

TEST(Accuracy, OutputScaleIsTheRootMeanSquareOfEveryFiniteFloat) {
  const std::vector<Tensor> outs = {T(DType::kF32, {2}, {3.0, -4.0}),
                                    T(DType::kI64, {2}, {1000, 1000}),
                                    T(DType::kF32, {2}, {0.0, INFINITY})};
  EXPECT_NEAR(output_scale(outs), std::sqrt(25.0 / 3.0), 1e-12);
  EXPECT_EQ(output_scale({T(DType::kF32, {2}, {0.0, 0.0})}), 1.0);
}

TEST(Accuracy, FarFromBothEagerAndFp64Fails) {
  const int n = 2000;
  std::vector<double> truth = ramp(n, 0.5), eager(n), compiled(n);
  for (int i = 0; i < n; ++i) {
    eager[i] = truth[i] + 1e-5;
    compiled[i] = truth[i] + 1e-2;
  }
  auto a = compare_output(T(DType::kF32, {n}, compiled), T(DType::kF32, {n}, eager),
                          T(DType::kF64, {n}, truth), {});
  EXPECT_FALSE(a.passed);
  EXPECT_EQ(a.mismatches, n);
  EXPECT_EQ(a.first_mismatch, 0);
  EXPECT_NEAR(a.rmse_vs_fp64, 1e-2, 1e-6);
}

// NaN and inf the backend shares with eager stay out of the RMSE figures (they made both NaN, and
// an ill-conditioned output holding one NaN could never pass); a non-finite value the backend
// does not share with eager is never excused by the RMSE rule.
TEST(Accuracy, SharedNonFiniteValuesStayOutOfTheRmseRule) {
  const int n = 2000;
  std::vector<double> truth = ramp(n, 0.5), eager(n), compiled(n);
  for (int i = 0; i < n; ++i) {
    eager[i] = truth[i] + 3e-3;
    compiled[i] = truth[i];
  }
  for (std::vector<double>* v : {&truth, &eager, &compiled}) {
    (*v)[7] = NAN;
    (*v)[8] = INFINITY;
  }
  auto a = compare_output(T(DType::kF32, {n}, compiled), T(DType::kF32, {n}, eager),
                          T(DType::kF64, {n}, truth), {});
  EXPECT_TRUE(std::isfinite(a.rmse_vs_fp64));
  EXPECT_TRUE(a.passed);
  compiled[9] = NAN;  // a NaN of its own: fails whatever the RMSE says
  a = compare_output(T(DType::kF32, {n}, compiled), T(DType::kF32, {n}, eager),
                     T(DType::kF64, {n}, truth), {});
  EXPECT_FALSE(a.passed);
  compiled[9] = truth[9];
  compiled[8] = -INFINITY;  // the wrong infinity
  a = compare_output(T(DType::kF32, {n}, compiled), T(DType::kF32, {n}, eager),
                     T(DType::kF64, {n}, truth), {});
  EXPECT_FALSE(a.passed);
}

TEST(Accuracy, MultiplierIsTwoForLargeF32AndThreeForSmallOrBf16) {
  // Result RMSE 2.5x eager's: fails for 2000 f32 elements (m = 2), passes for 500 (m = 3).
  auto check = [](int n, DType dt) {
    std::vector<double> truth(n, 1.0), eager(n), compiled(n);
    for (int i = 0; i < n; ++i) {
      eager[i] = 1.0 + (i % 2 ? 1e-2 : -1e-2);
      compiled[i] = 1.0 + (i % 2 ? 2.5e-2 : -2.5e-2);
    }
    AccuracyOptions o;
    o.tol = 1e-4;
    return compare_output(T(dt, {n}, compiled), T(dt, {n}, eager), T(DType::kF64, {n}, truth), o)
        .passed;
  };
  EXPECT_FALSE(check(2000, DType::kF32));
  EXPECT_TRUE(check(500, DType::kF32));
}

TEST(Accuracy, IntegersAndBoolMustMatchExactly) {
  Tensor ref = T(DType::kU8, {4}, {0, 255, 7, 9});
  EXPECT_TRUE(compare_output(T(DType::kU8, {4}, {0, 255, 7, 9}), ref, Tensor(), {}).passed);
  auto a = compare_output(T(DType::kU8, {4}, {0, 254, 7, 8}), ref, Tensor(), {});
  EXPECT_FALSE(a.passed);
  EXPECT_EQ(a.mismatches, 2);
  EXPECT_EQ(a.first_mismatch, 1);
  EXPECT_EQ(a.max_abs_err, 1);
  EXPECT_FALSE(
      compare_output(T(DType::kBool, {2}, {1, 0}), T(DType::kBool, {2}, {1, 1}), Tensor(), {})
          .passed);
}

TEST(Accuracy, NanInTheSamePlaceIsEqualOnlyWithEqualNan) {
  Tensor ref = T(DType::kF32, {2}, {NAN, 1.0});
  Tensor res = T(DType::kF32, {2}, {NAN, 1.0});
  EXPECT_TRUE(compare_output(res, ref, ref.to(DType::kF64), {}).passed);
  AccuracyOptions strict;
  strict.equal_nan = false;
  EXPECT_FALSE(compare_output(res, ref, ref.to(DType::kF64), strict).passed);
  auto a = compare_output(T(DType::kF32, {2}, {0.0, 1.0}), ref, ref.to(DType::kF64), {});
  EXPECT_FALSE(a.passed);
  EXPECT_EQ(a.first_mismatch, 0);
}

TEST(Accuracy, InfinitiesMustMatch) {
  Tensor ref = T(DType::kF32, {2}, {INFINITY, -1});
  EXPECT_TRUE(
      compare_output(T(DType::kF32, {2}, {INFINITY, -1}), ref, ref.to(DType::kF64), {}).passed);
  EXPECT_FALSE(
      compare_output(T(DType::kF32, {2}, {-INFINITY, -1}), ref, ref.to(DType::kF64), {}).passed);
}

TEST(Accuracy, CosineModeIgnoresScaleOfSmallErrors) {
  const int n = 100;
  std::vector<double> e = ramp(n, 1.0), r(n);
  for (int i = 0; i < n; ++i)
    r[i] = e[i] * 1.01;  // 1% off everywhere: allclose fails, direction same
  AccuracyOptions cos;
  cos.cosine = true;
  auto a =
      compare_output(T(DType::kF32, {n}, r), T(DType::kF32, {n}, e), T(DType::kF64, {n}, e), cos);
  EXPECT_TRUE(a.passed);
  EXPECT_NEAR(a.cosine, 1.0, 1e-9);
  std::vector<double> flipped(n);
  for (int i = 0; i < n; ++i) flipped[i] = (i % 2) ? e[i] : -e[i];
  EXPECT_FALSE(
      compare_output(T(DType::kF32, {n}, flipped), T(DType::kF32, {n}, e), Tensor(), cos).passed);
}

TEST(Accuracy, ShapeOrDtypeMismatchFails) {
  Tensor ref = T(DType::kF32, {2}, {1, 2});
  auto a = compare_output(T(DType::kF32, {1, 2}, {1, 2}), ref, Tensor(), {});
  EXPECT_FALSE(a.passed);
  EXPECT_NE(a.shape.find("eager: f32[2]"), std::string::npos);
  EXPECT_FALSE(compare_output(T(DType::kF64, {2}, {1, 2}), ref, Tensor(), {}).passed);
}

TEST(Accuracy, IdenticalTreatsNansAsEqualAndZeroSignsAsDifferent) {
  EXPECT_TRUE(identical(T(DType::kF32, {2}, {NAN, 1}), T(DType::kF32, {2}, {NAN, 1})));
  EXPECT_FALSE(identical(T(DType::kF32, {1}, {0.0}), T(DType::kF32, {1}, {-0.0})));
  EXPECT_FALSE(identical(T(DType::kF32, {1}, {1.0}), T(DType::kF32, {1}, {1.0000001})));
}

TEST(Accuracy, PassSuspiciousWhenRmseVsFp64IsFarOverEagersYetAllclosePasses) {
  const int n = 2000;  // multiplier 2
  std::vector<double> f(n), e(n), r(n);
  for (int i = 0; i < n; ++i) {
    f[i] = 1.0 + i * 1e-3;
    e[i] = f[i] + 1e-7;                     // eager: tiny, uniform rounding
    r[i] = e[i] + (i % 8 == 0 ? 6e-5 : 0);  // allclose to eager (tol 1e-4), far from fp64
  }
  const Tensor E = T(DType::kF32, {n}, e), F = T(DType::kF64, {n}, f);
  auto a = compare_output(T(DType::kF32, {n}, r), E, F, {});
  EXPECT_TRUE(a.passed);
  EXPECT_TRUE(pass_suspicious(a, T(DType::kF32, {n}, r), {}));
  // As close to fp64 as eager: not suspicious; nor is a failure (it is a failure) or cosine mode.
  auto same = compare_output(E, E, F, {});
  EXPECT_FALSE(pass_suspicious(same, E, {}));
  AccuracyOptions cos;
  cos.cosine = true;
  EXPECT_FALSE(pass_suspicious(a, T(DType::kF32, {n}, r), cos));
  a.passed = false;
  EXPECT_FALSE(pass_suspicious(a, T(DType::kF32, {n}, r), {}));
  // An eager that is exact leaves ordinary rounding (under tol/1000) unflagged.
  auto exact = compare_output(T(DType::kF32, {n}, e), T(DType::kF32, {n}, f), F, {});
  EXPECT_FALSE(pass_suspicious(exact, T(DType::kF32, {n}, e), {}));
}

}  // namespace
}  // namespace crucible
