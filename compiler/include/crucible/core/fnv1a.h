// FNV-1a, 64-bit: a stable, fast, non-cryptographic hash for keys and short names (the same
// value on every build and machine, unlike std::hash).
#pragma once

#include <cstdint>
#include <string_view>

namespace crucible {

constexpr uint64_t kFnv1aOffset = 14695981039346656037ull;  // 0xcbf29ce484222325

// Folds `bytes` into `h` (start from kFnv1aOffset).
constexpr uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Folds the 8 bytes of `x`, least significant first.
constexpr uint64_t fnv1a_u64(uint64_t x, uint64_t h) {
  for (int i = 0; i < 8; ++i, x >>= 8) h = (h ^ (x & 0xff)) * 1099511628211ull;
  return h;
}

}  // namespace crucible
