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
  float exp_lo, exp_hi;  // exp's input range, [-104, 88.75]
  float erf_sq_hi;       // erf's bound on x^2, 16
  float one;             // erf's result bound
  float tanh_hi;         // tanh's bound on |x|, 44
};
inline volatile float limit_values[5] = {-104.0f, 88.75f, 16.0f, 1.0f, 44.0f};
inline Limits limits() {
  return {limit_values[0], limit_values[1], limit_values[2], limit_values[3], limit_values[4]};
}

// exp(x) for float within 1.02 ulp over the whole float range (checked against libm): NaN stays
// NaN, results overflow to inf exactly where libm's do (x > 88.7228) and fall through the
// denormals to 0 below x = -103.97, as libm's. Cody-Waite reduction x = n ln2 + r and a degree-6
// minimax polynomial for exp(r) on [-ln2/2, ln2/2] (relative error 2e-9, so float rounding
// dominates); 2^n is built from n's bits. n reaches [-150, 128] once the input is clamped to
// [-104, 88.75], wider than a float's exponent, so 2^n is applied as two normal factors and the
// only rounding is the last product's (into the denormals, or to inf). Each form below knows its
// argument's range and pays for the factors that range needs.

// p = exp(r) and t = x / ln2 + round, whose low mantissa bits hold n + (round - 1.5 * 2^23).
struct ExpParts {
  float p, t, n;
};
inline ExpParts exp_parts(float x, float round) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  const float t = x * kLog2e + round;
  const float n = t - round;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.384365349105e-03f;
  p = p * r + 8.374155317418e-03f;
  p = p * r + 4.166800203639e-02f;
  p = p * r + 1.666643126253e-01f;
  p = p * r + 4.999999420904e-01f;
  p = p * r + 1.000000032165e+00f;
  p = p * r + 1.0f;
  return {p, t, n};
}
// 1.5 * 2^23 + b: adding it rounds x / ln2 to n and leaves n + b in the low mantissa bits, so
// shifting the sum's bits left by 23 gives the bits of 2^(n + b - 127).
constexpr float round_with_bias(int b) { return 12582912.0f + static_cast<float>(b); }

// Any x in [-104, 88.75] (or NaN): 2^(n-1) * 2 for n >= 0, and 2^(n+23) * 2^-23 below, so that
// the clamped bottom (n = -150) builds the factor 0 and masked-out logits (-inf, -1e4) give an
// exact 0 without passing through the denormals, which cost a microcode assist per element.
inline float exp_clamped_f32(float x) {
  const ExpParts e = exp_parts(x, round_with_bias(126));
  constexpr uint32_t kShift = 24u << 23;  // from the factors (n-1, 1) to (n+23, -23)
  const uint32_t shift = static_cast<uint32_t>(static_cast<int32_t>(bits_of(e.n)) >> 31) & kShift;
  const float s1 = float_of((bits_of(e.t) << 23) + shift);
  const float s2 = float_of((128u << 23) - shift);
  return (e.p * s1) * s2;
}
// x in [-104, 0] (or NaN): n in [-150, 0], so 2^(n+23) is normal or (at the clamp) 0, and 2^-23
// a constant factor.
inline float exp_clamped_nonpos_f32(float x) {
  const ExpParts e = exp_parts(x, round_with_bias(150));
  return (e.p * float_of(bits_of(e.t) << 23)) * 1.1920928955078125e-07f;  // 2^-23
}
// x in [0, 88] (or NaN): n in [0, 127], so 2^n is one normal factor.
inline float exp_clamped_nonneg_f32(float x) {
  const ExpParts e = exp_parts(x, round_with_bias(127));
  return e.p * float_of(bits_of(e.t) << 23);
}

inline float exp_f32(float x) {
  x = select(x < -104.0f, -104.0f, x);
  x = select(x > 88.75f, 88.75f, x);
  return exp_clamped_f32(x);
}
// The same values as exp_f32, clamped with bounds from limits() (NaN passes both clamps).
inline float exp_lim_f32(float x, const Limits& l) {
  x = x < l.exp_lo ? l.exp_lo : x;
  x = x > l.exp_hi ? l.exp_hi : x;
  return exp_clamped_f32(x);
}
// exp_f32 for arguments that cannot be positive, such as softmax's x - max(x) <= 0 (or NaN): no
// upper clamp and one scale factor. A positive argument gives garbage, not exp.
inline float exp_nonpos_lim_f32(float x, const Limits& l) {
  x = x < l.exp_lo ? l.exp_lo : x;
  return exp_clamped_nonpos_f32(x);
}

// tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)) for |x| >= 0.5, saturating to +-1 (2|x| is capped
// at 88, inside exp's one-factor range); below, where that difference cancels, the odd Taylor
// polynomial to x^15 (truncation under 0.1 ulp at 0.5), so small arguments keep their relative
// accuracy (tanh(1e-10) = 1e-10, not 0). Both are computed and blended on |x|, which keeps the
// loop branch-free; the sign is set last. Within 1.9 ulp over the whole float range.
inline float with_sign_of(float x, float magnitude) {  // |x| carries x's sign bit: tanh(-0) = -0
  return float_of(bits_of(magnitude) | (bits_of(x) & 0x80000000u));
}
inline float tanh_small_f32(float x) {
  const float s = x * x;
  float p = -1.4558343870513183e-03f;   // -929569/638512875
  p = p * s + 3.5921280365724810e-03f;  // 21844/6081075
  p = p * s - 8.8632355299021966e-03f;  // 1382/155925
  p = p * s + 2.1869488536155203e-02f;  // 62/2835
  p = p * s - 5.3968253968253971e-02f;  // 17/315
  p = p * s + 1.3333333333333333e-01f;  // 2/15
  p = p * s - 3.3333333333333333e-01f;
  return x + x * s * p;
}
inline float tanh_from_abs(float x, float a) {
  const float e = exp_clamped_nonneg_f32(2.0f * a);
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return with_sign_of(x, select(a < 0.5f, tanh_small_f32(a), t));
}
inline float tanh_f32(float x) {
  const float a = x < 0.0f ? -x : x;
  return tanh_from_abs(x, select(a > 44.0f, 44.0f, a));
}
inline float tanh_lim_f32(float x, const Limits& l) {
  const float a = x < 0.0f ? -x : x;
  return tanh_from_abs(x, a > l.tanh_hi ? l.tanh_hi : a);
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
