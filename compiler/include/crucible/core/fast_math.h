// Branch-free float math that GCC vectorizes under `#pragma omp simd` (libm calls do not vectorize
// without -ffast-math). Self-contained: the codegen backend embeds this very file in generated
// code.
#pragma once

#include <cstdint>
#include <cstring>

namespace crucible_fast {

// exp(x) for float within 1 ulp over the normal range; x < -87.34 flushes to 0 (denormal results
// are not produced), x > 88.38 gives inf, NaN stays NaN. Cody-Waite reduction by ln2, degree-7
// polynomial, and the exponent assembled from the rounding constant's low bits. Out-of-range lanes
// compute garbage that the final masks discard: masks, not selects, so GCC does not turn them into
// branches.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMin = -87.3365447f;   // exp(kMin) = FLT_MIN
  constexpr float kMax = 88.3762626f;    // round(kMax * log2(e)) = 127, the largest exponent
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const uint32_t scale_bits = (t_bits - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float y = p * scale;
  uint32_t y_bits, x_bits;
  std::memcpy(&y_bits, &y, sizeof y_bits);
  std::memcpy(&x_bits, &x, sizeof x_bits);
  const uint32_t under = 0u - static_cast<uint32_t>(x < kMin);
  const uint32_t over = 0u - static_cast<uint32_t>(x > kMax);
  const uint32_t nan = 0u - static_cast<uint32_t>(x != x);
  y_bits = (y_bits & ~under & ~over) | (0x7f800000u & over);
  y_bits = (y_bits & ~nan) | (x_bits & nan);
  float out;
  std::memcpy(&out, &y_bits, sizeof out);
  return out;
}

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)): absolute error below 2e-7; saturates to +-1.
inline float tanh_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  const float e = exp_f32(2.0f * (a > 44.0f ? 44.0f : a));
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -t : t;
}

// erf(x) by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), odd-symmetric.
inline float erf_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * exp_f32(-a * a);
  return x < 0.0f ? -y : y;
}

}  // namespace crucible_fast
