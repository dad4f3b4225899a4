// Counter-based random fills (SplitMix64 + Box-Muller), identical across machines and thread
// counts.
#include "crucible/core/rng.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "crucible/core/error.h"

namespace crucible {

uint64_t random_bits(uint64_t seed, uint64_t counter) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (counter + 1) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  // A second round decorrelates nearby (seed, counter) pairs that the linear combination above
  // aligns.
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double random_uniform(uint64_t seed, uint64_t counter) {
  return static_cast<double>(random_bits(seed, counter) >> 11) * 0x1.0p-53;
}

double random_normal(uint64_t seed, uint64_t counter) {
  const uint64_t pair = counter & ~uint64_t{1};
  const double u1 = 1.0 - random_uniform(seed, pair);  // (0, 1]: log is finite
  const double u2 = random_uniform(seed, pair + 1);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  return (counter & 1) ? r * std::sin(theta) : r * std::cos(theta);
}

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return random_bits(seed ^ 0x5eed5eed5eedull, stream);
}

namespace {
template <typename Gen>
void fill_with(Tensor& t, const char* what, Gen gen) {
  if (!t.is_contiguous()) throw Error(fmt::format("{}: tensor must be contiguous", what));
  dispatch_all(t.dtype(), what, [&]<typename T>() {
    T* p = t.data<T>();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = gen.template operator()<T>(static_cast<uint64_t>(i));
  });
}
}  // namespace

void fill_randn(Tensor& t, uint64_t seed, double mean, double std) {
  fill_with(t, "randn", [&]<typename T>(uint64_t i) -> T {
    double v = mean + std * random_normal(seed, i);
    if constexpr (std::is_same_v<T, bool>) return v > 0;
    return from_double<T>(v);
  });
}

void fill_uniform(Tensor& t, uint64_t seed, double low, double high) {
  fill_with(t, "uniform", [&]<typename T>(uint64_t i) -> T {
    double v = low + (high - low) * random_uniform(seed, i);
    if constexpr (std::is_same_v<T, bool>) return v >= 0.5;
    return from_double<T>(v);
  });
}

void fill_randint(Tensor& t, uint64_t seed, int64_t low, int64_t high) {
  if (high <= low) throw Error(fmt::format("randint: empty range [{}, {})", low, high));
  const uint64_t span = static_cast<uint64_t>(high - low);
  fill_with(t, "randint", [&]<typename T>(uint64_t i) -> T {
    // Multiply-shift maps 64 random bits onto [0, span) without modulo bias worth measuring.
    unsigned __int128 wide = static_cast<unsigned __int128>(random_bits(seed, i)) * span;
    int64_t v = low + static_cast<int64_t>(wide >> 64);
    if constexpr (std::is_same_v<T, bool>) return v != 0;
    return static_cast<T>(static_cast<compute_t<T>>(v));
  });
}

}  // namespace crucible
