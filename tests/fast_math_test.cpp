// The vectorizable float math shared by eager and generated code (crucible/core/fast_math.h)
// against libm in double: ulp bounds over dense float samples, and the special values.
#include "crucible/core/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace crucible {
namespace {

// Distance from `got` to the exact `ref`, in units of the last place of ref rounded to float.
double ulp_error(float got, double ref) {
  const float rf = static_cast<float>(ref);
  const int e = rf == 0 ? -126 : std::max(std::ilogb(rf), -126);
  return std::fabs(static_cast<double>(got) - ref) / std::ldexp(1.0, e - 23);
}

// Every `step`-th float bit pattern with a value in [lo, hi]: a few million samples that cover
// every binade, the round-to-integer boundaries of exp and the small-argument end of erf.
template <typename F, typename R>
double max_ulp(F f, R ref, float lo, float hi, uint32_t step, float* worst) {
  double m = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += step) {
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, sizeof x);
    if (!(x >= lo && x <= hi)) continue;
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > m) {
      m = e;
      *worst = x;
    }
  }
  return m;
}

TEST(FastMath, ExpIsWithinAboutOneUlpOverTheNormalRange) {
  float worst = 0;
  const double e = max_ulp(
      crucible_fast::exp_f32, [](double x) { return std::exp(x); }, -87.3f, 88.3f, 251, &worst);
  EXPECT_LE(e, 1.1) << "at x = " << worst;
}

TEST(FastMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(crucible_fast::exp_f32(0.0f), 1.0f);  // exact: a softmax of equal values is exact
  EXPECT_EQ(crucible_fast::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(crucible_fast::exp_f32(-inf), 0.0f);  // masked-out logits give exact zeros
  EXPECT_EQ(crucible_fast::exp_f32(-1000.0f), 0.0f);
  EXPECT_EQ(crucible_fast::exp_f32(-88.0f), 0.0f);
  EXPECT_EQ(crucible_fast::exp_f32(inf), inf);
  EXPECT_EQ(crucible_fast::exp_f32(1000.0f), inf);
  EXPECT_EQ(crucible_fast::exp_f32(88.6f), inf);
  EXPECT_TRUE(std::isnan(crucible_fast::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(crucible_fast::exp_f32(-std::numeric_limits<float>::quiet_NaN())));
  // Denormal results just below FLT_MIN, close to libm.
  const float d = crucible_fast::exp_f32(-87.5f);
  EXPECT_GT(d, 0.0f);
  EXPECT_NEAR(d, std::exp(-87.5), 2e-45);
}

TEST(FastMath, ErfIsWithinAFewUlpEverywhere) {
  float worst = 0;
  const auto ref = [](double x) { return std::erf(x); };
  EXPECT_LE(max_ulp(crucible_fast::erf_f32, ref, -6.0f, 6.0f, 97, &worst), 6.5)
      << "at x = " << worst;
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

TEST(FastMath, TanhStaysAccurateOnTheNewExp) {
  double m = 0;
  for (float x = -20.0f; x <= 20.0f; x += 0.001f) {
    m = std::max(m, std::fabs(crucible_fast::tanh_f32(x) - std::tanh(static_cast<double>(x))));
  }
  EXPECT_LT(m, 2e-7);
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
  for (float x : {0.0f, -0.0f, inf, -inf, nan, -nan, 88.4f, 88.6f, -87.9f, -88.1f, 4.0f, 4.1f,
                  -4.1f, 1e30f, -1e30f, 1e-30f}) {
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
