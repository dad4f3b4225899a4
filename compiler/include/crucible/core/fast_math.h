// Branch-free float math that GCC vectorizes under `#pragma omp simd` (libm calls do not vectorize
// without -ffast-math). Self-contained: the codegen backend embeds this very file in generated
// code.
#pragma once

#include <cstdint>
#include <cstring>

namespace crucible_fast {

// Bit-level helpers. `select` is a mask blend, not a ?: (GCC turns a ?: with a constant arm into
// branches or duplicated masked paths instead of one blend), and it keeps NaN from `b`.
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return float_of((bits_of(a) & m) | (bits_of(b) & ~m));
}

// Clamp bounds as values the compiler cannot see through. Against a literal bound a clamp
// stays a mask blend (`select`): a ?: there lets GCC thread the constant through the rest of the
// function (duplicated masked paths on AVX-512, branches and no vectorization on AVX2). Loaded
// from `limits()` once per thread or row, outside the vector loops, and passed to the *_lim_f32
// forms below, the bounds make each clamp a single vmaxps/vminps. `limits()` reads volatile
// storage, so it must never be called inside a loop meant to vectorize.
struct Limits {
  float exp_lo, exp_hi;  // exp's input range, [-88, 88.5]
  float erf_sq_hi;       // erf's bound on x^2, 16
  float one;             // erf's result bound
};
inline volatile float limit_values[4] = {-88.0f, 88.5f, 16.0f, 1.0f};
inline Limits limits() {
  return {limit_values[0], limit_values[1], limit_values[2], limit_values[3]};
}

// exp(x) for float within 1.06 ulp (checked over every float in [-87.3, 88.3]); NaN stays NaN,
// x > 88.38 gives inf, results below FLT_MIN are denormal down to x = -87.68 and 0 below. The
// input is clamped to [-88, 88.5] first, so n = round(x / ln2) stays in [-127, 128]: 2^n is then
// built from n's bits without masks (n = -127 gives 0, n = 128 gives inf). Cody-Waite reduction
// by ln2 and a degree-6 minimax polynomial on [-ln2/2, ln2/2] (relative error 2e-9, so float
// rounding dominates): about 15 vector operations, all on the FP pipes.
inline float exp_clamped_f32(float x) {  // x in [-88, 88.5], or NaN
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  // 1.5 * 2^23 + 127: adding it rounds x / ln2 to an integer n and leaves n + 127, the biased
  // exponent of 2^n, in the low mantissa bits, so a shift by 23 builds 2^n.
  constexpr float kRound = 12583039.0f;
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.384365349105e-03f;
  p = p * r + 8.374155317418e-03f;
  p = p * r + 4.166800203639e-02f;
  p = p * r + 1.666643126253e-01f;
  p = p * r + 4.999999420904e-01f;
  p = p * r + 1.000000032165e+00f;
  p = p * r + 1.0f;
  return p * float_of(bits_of(t) << 23);
}
inline float exp_f32(float x) {
  x = select(x < -88.0f, -88.0f, x);
  x = select(x > 88.5f, 88.5f, x);
  return exp_clamped_f32(x);
}
// The same values as exp_f32, clamped with bounds from limits() (NaN passes both clamps).
inline float exp_lim_f32(float x, const Limits& l) {
  x = x < l.exp_lo ? l.exp_lo : x;
  x = x > l.exp_hi ? l.exp_hi : x;
  return exp_clamped_f32(x);
}
// exp_f32 for arguments that cannot exceed 88.5, such as softmax's x - max(x) <= 0 (or NaN):
// the upper clamp is dropped, one operation fewer. A larger argument gives garbage, not inf.
inline float exp_nonpos_lim_f32(float x, const Limits& l) {
  x = x < l.exp_lo ? l.exp_lo : x;
  return exp_clamped_f32(x);
}

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)): absolute error below 2e-7; saturates to +-1.
inline float tanh_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  const float e = exp_f32(2.0f * (a > 44.0f ? 44.0f : a));
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -t : t;
}
inline float tanh_lim_f32(float x, const Limits& l) {
  const float a = x < 0.0f ? -x : x;
  const float e = exp_lim_f32(2.0f * (a > 44.0f ? 44.0f : a), l);
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -t : t;
}

// erf(x) = x * P(x^2) / Q(x^2), a degree 5/5 rational fitted (weighted least squares towards
// minimax of the relative error, 2.5e-8) on |x| <= 4, beyond which erf rounds to +-1 in float.
// x^2 is clamped to 16 and the result to [-1, 1], so large |x| and +-inf give exactly +-1 and NaN
// stays NaN. Error at most 6.2 ulp (near |x| = 3.3, under 4e-7 absolute) and 4 ulp for |x| < 1,
// checked over every float in [-6, 6]. No exp and one division: half the vector
// operations of the exp-based forms.
inline float erf_rational_f32(float x, float s) {  // s = x^2 clamped to 16
  float p = 1.9867886930e-06f;
  p = p * s + 2.8456638017e-04f;
  p = p * s + 3.8833436934e-03f;
  p = p * s + 5.3101742791e-02f;
  p = p * s + 1.9354498974e-01f;
  p = p * s + 1.1283791393e+00f;
  float q = 3.7420267001e-05f;
  q = q * s + 1.1855720566e-03f;
  q = q * s + 1.5207248774e-02f;
  q = q * s + 1.1534997636e-01f;
  q = q * s + 5.0485733672e-01f;
  q = q * s + 1.0f;
  return x * p / q;
}
inline float erf_f32(float x) {
  float s = x * x;
  s = select(s > 16.0f, 16.0f, s);
  const float y = erf_rational_f32(x, s);
  return select(y < -1.0f, -1.0f, select(y > 1.0f, 1.0f, y));
}
// The same values as erf_f32, clamped with bounds from limits().
inline float erf_lim_f32(float x, const Limits& l) {
  float s = x * x;
  s = s > l.erf_sq_hi ? l.erf_sq_hi : s;
  float y = erf_rational_f32(x, s);
  y = y > l.one ? l.one : y;
  const float minus_one = -l.one;
  return y < minus_one ? minus_one : y;
}

}  // namespace crucible_fast
