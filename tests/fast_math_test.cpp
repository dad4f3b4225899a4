// The vectorizable float math shared by eager and generated code (crucible/core/fast_math.h)
// against libm in double: ulp bounds over dense float samples, and the special values.
#include "crucible/core/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace crucible {
namespace {

// Distance from `got` to the exact `ref`, in units of the last place of ref rounded to float
// (2^-149 in the denormals). Past FLT_MAX, inf counts as the next step: a result that overflows
// one ulp early or late is 1 ulp off, a finite result where libm overflows (or the reverse)
// further away is caught, and NaN must meet NaN.
double ulp_error(float got, double ref) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) == std::isnan(got) ? 0 : 1e30;
  const double top = std::numeric_limits<float>::max();
  const double step = std::ldexp(1.0, 127 - 23);
  const double g = std::isinf(got) ? std::copysign(top + step, got) : got;
  const double r = std::isinf(static_cast<float>(ref)) ? std::copysign(top + step, ref) : ref;
  if (std::fabs(r) > top) return std::fabs(g - r) / step;
  const float rf = static_cast<float>(ref);
  const int e = rf == 0 ? -126 : std::max(std::ilogb(rf), -126);
  return std::fabs(g - r) / std::ldexp(1.0, e - 23);
}

// Every `step`-th float bit pattern with a value in [lo, hi] (infinities and NaNs included when
// the range is the whole line): millions of samples covering every binade.
template <typename F, typename R>
double max_ulp(F f, R ref, float lo, float hi, uint32_t step, float* worst) {
  double m = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += step) {
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!std::isnan(x) && !(x >= lo && x <= hi)) continue;
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > m) {
      m = e;
      *worst = x;
    }
  }
  return m;
}

// Every float in [lo, hi]: for the edges of a function's range, where a clamp or an exponent
// trick can go wrong for a few thousand arguments and sampling would miss them.
template <typename F, typename R>
double max_ulp_every(F f, R ref, float lo, float hi, float* worst) {
  double m = 0;
  for (float x = lo; x <= hi; x = std::nextafter(x, hi + 1.0f)) {
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > m) {
      m = e;
      *worst = x;
    }
    if (x == hi) break;
  }
  return m;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
const auto kExpRef = [](double x) { return std::exp(x); };

TEST(FastMath, ExpIsWithinAboutOneUlpOverTheWholeFloatRange) {
  CRUCIBLE_SKIP_WHEN_SANITIZED(
      "the ulp bounds are the optimized build's; at -O1 the polynomial rounds otherwise (1.20 ulp "
      "at x = 5.93 measured)");
  float worst = 0;
  EXPECT_LE(max_ulp(crucible_fast::exp_f32, kExpRef, -kInf, kInf, 509, &worst), 1.1)
      << "at x = " << worst;
  const crucible_fast::Limits lim = crucible_fast::limits();
  const auto exp_lim = [&](float x) { return crucible_fast::exp_lim_f32(x, lim); };
  EXPECT_LE(max_ulp(exp_lim, kExpRef, -kInf, kInf, 509, &worst), 1.1) << "at x = " << worst;
  const auto exp_nonpos = [&](float x) { return crucible_fast::exp_nonpos_lim_f32(x, lim); };
  EXPECT_LE(max_ulp(exp_nonpos, kExpRef, -kInf, 0.0f, 509, &worst), 1.1) << "at x = " << worst;
}

// The overflow edge: libm's exp is finite up to 88.7228 (FLT_MAX) and inf past it; the early
// overflow this guards against gave inf over [88.38, 88.72].
TEST(FastMath, ExpOverflowsExactlyWhereLibmDoes) {
  float worst = 0;
  EXPECT_LE(max_ulp_every(crucible_fast::exp_f32, kExpRef, 88.0f, 89.0f, &worst), 1.1)
      << "at x = " << worst;
  EXPECT_TRUE(std::isfinite(crucible_fast::exp_f32(88.72f)));
  EXPECT_GT(crucible_fast::exp_f32(88.72f), 3.3e38f);
  EXPECT_EQ(crucible_fast::exp_f32(88.73f), kInf);
}

// The underflow edge: results below FLT_MIN are denormal down to x = -103.97 (the early flush
// this guards against gave 0 below -87.6, so log(softmax(x)) gave -inf where PyTorch gives -87.79).
TEST(FastMath, ExpFallsThroughTheDenormalsLikeLibm) {
  float worst = 0;
  const crucible_fast::Limits lim = crucible_fast::limits();
  const auto exp_nonpos = [&](float x) { return crucible_fast::exp_nonpos_lim_f32(x, lim); };
  EXPECT_LE(max_ulp_every(crucible_fast::exp_f32, kExpRef, -105.0f, -86.0f, &worst), 1.1)
      << "at x = " << worst;
  EXPECT_LE(max_ulp_every(exp_nonpos, kExpRef, -105.0f, -86.0f, &worst), 1.1) << "at x = " << worst;
  EXPECT_NEAR(std::log(crucible_fast::exp_f32(-87.79f)), -87.79, 1e-3);
  EXPECT_GT(crucible_fast::exp_f32(-103.0f), 0.0f);
  EXPECT_EQ(crucible_fast::exp_f32(-104.0f), 0.0f);  // below half the smallest denormal
}

TEST(FastMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(crucible_fast::exp_f32(0.0f), 1.0f);  // exact: a softmax of equal values is exact
  EXPECT_EQ(crucible_fast::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(crucible_fast::exp_f32(-inf), 0.0f);  // masked-out logits give exact zeros
  EXPECT_EQ(crucible_fast::exp_f32(-1000.0f), 0.0f);
  EXPECT_EQ(crucible_fast::exp_f32(inf), inf);
  EXPECT_EQ(crucible_fast::exp_f32(1000.0f), inf);
  EXPECT_EQ(crucible_fast::exp_f32(88.8f), inf);
  EXPECT_TRUE(std::isnan(crucible_fast::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(crucible_fast::exp_f32(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, TanhIsWithinTwoUlpOverTheWholeFloatRange) {
  CRUCIBLE_SKIP_WHEN_SANITIZED(
      "the ulp bounds are the optimized build's; at -O1 the polynomial rounds otherwise (1.20 ulp "
      "at x = 5.93 measured)");
  float worst = 0;
  const auto ref = [](double x) { return std::tanh(x); };
  EXPECT_LE(max_ulp(crucible_fast::tanh_f32, ref, -kInf, kInf, 509, &worst), 2.0)
      << "at x = " << worst;
  // Around the switch from the polynomial to the exp form, every float.
  EXPECT_LE(max_ulp_every(crucible_fast::tanh_f32, ref, 0.4f, 0.6f, &worst), 2.0)
      << "at x = " << worst;
  const crucible_fast::Limits lim = crucible_fast::limits();
  const auto tanh_lim = [&](float x) { return crucible_fast::tanh_lim_f32(x, lim); };
  EXPECT_LE(max_ulp(tanh_lim, ref, -kInf, kInf, 509, &worst), 2.0) << "at x = " << worst;
}

TEST(FastMath, TanhSpecialValues) {
  EXPECT_EQ(crucible_fast::tanh_f32(kInf), 1.0f);
  EXPECT_EQ(crucible_fast::tanh_f32(-kInf), -1.0f);
  EXPECT_EQ(crucible_fast::tanh_f32(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(crucible_fast::tanh_f32(-0.0f)));
  EXPECT_EQ(crucible_fast::tanh_f32(1e-10f), 1e-10f);  // relative accuracy near 0
  EXPECT_EQ(crucible_fast::tanh_f32(-1e-30f), -1e-30f);
  EXPECT_TRUE(std::isnan(crucible_fast::tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, ErfIsWithinAFewUlpEverywhere) {
  float worst = 0;
  const auto ref = [](double x) { return std::erf(x); };
  EXPECT_LE(max_ulp(crucible_fast::erf_f32, ref, -kInf, kInf, 97, &worst), 6.5)
      << "at x = " << worst;
  const crucible_fast::Limits lim = crucible_fast::limits();
  const auto erf_lim = [&](float x) { return crucible_fast::erf_lim_f32(x, lim); };
  EXPECT_LE(max_ulp(erf_lim, ref, -kInf, kInf, 509, &worst), 6.5) << "at x = " << worst;
  // Small arguments are relative-accurate (erf(x) ~ 2x/sqrt(pi)), not just absolute.
  EXPECT_LE(max_ulp(crucible_fast::erf_f32, ref, -1.0f, 1.0f, 97, &worst), 4.0)
      << "at x = " << worst;
}

TEST(FastMath, ErfSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(crucible_fast::erf_f32(0.0f), 0.0f);
  EXPECT_EQ(crucible_fast::erf_f32(inf), 1.0f);
  EXPECT_EQ(crucible_fast::erf_f32(-inf), -1.0f);
  EXPECT_EQ(crucible_fast::erf_f32(10.0f), 1.0f);
  EXPECT_EQ(crucible_fast::erf_f32(-10.0f), -1.0f);
  EXPECT_TRUE(std::isnan(crucible_fast::erf_f32(std::numeric_limits<float>::quiet_NaN())));
  for (float x : {0.3f, 1.7f, 2.9f})
    EXPECT_EQ(crucible_fast::erf_f32(-x), -crucible_fast::erf_f32(x));
}

// The forms clamped with limits() (what generated kernels and eager's softmax call) compute the
// very same bits as the plain ones, specials included; exp_nonpos agrees for every x <= 0.
TEST(FastMath, ClampedWithLimitsGivesTheSameBits) {
  const crucible_fast::Limits lim = crucible_fast::limits();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  auto same = [](float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
  };
  auto check = [&](float x) {
    EXPECT_TRUE(same(crucible_fast::exp_lim_f32(x, lim), crucible_fast::exp_f32(x))) << x;
    EXPECT_TRUE(same(crucible_fast::erf_lim_f32(x, lim), crucible_fast::erf_f32(x))) << x;
    EXPECT_TRUE(same(crucible_fast::tanh_lim_f32(x, lim), crucible_fast::tanh_f32(x))) << x;
    if (!(x > 0)) {
      EXPECT_TRUE(same(crucible_fast::exp_nonpos_lim_f32(x, lim), crucible_fast::exp_f32(x))) << x;
    }
  };
  for (float x :
       {0.0f,   -0.0f,   inf,     -inf,  nan,   -nan, 88.4f, 88.6f, 88.74f, 88.76f, -87.9f,
        -88.1f, -103.9f, -104.1f, 0.49f, 0.51f, 4.0f, 4.1f,  -4.1f, 1e30f,  -1e30f, 1e-30f}) {
    check(x);
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65537) {
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, sizeof x);
    check(x);
  }
}

}  // namespace
}  // namespace crucible
