// bfloat16 storage type: 16 bits, converted to and from float with round-to-nearest-even.
// Arithmetic happens in float; only storage is 16-bit, as in PyTorch's CPU kernels.
#pragma once

#include <cstdint>
#include <cstring>

namespace crucible {

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  BFloat16(float f) : bits(round_from_float(f)) {}  // NOLINT(google-explicit-constructor)
  operator float() const {                          // NOLINT(google-explicit-constructor)
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  static uint16_t round_from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }
};

}  // namespace crucible
