// Seeded, counter-based random streams that give the same numbers on every machine and thread
// count: element i of a fill depends only on (seed, i), never on libstdc++'s distributions or on
// scheduling.
#pragma once

#include <cstdint>

#include "crucible/core/tensor.h"

namespace crucible {

// SplitMix64 finaliser applied to seed and counter: a strong 64-bit mix, cheap and portable.
uint64_t random_bits(uint64_t seed, uint64_t counter);
// Uniform double in [0, 1) built from the top 53 bits of random_bits(seed, counter).
double random_uniform(uint64_t seed, uint64_t counter);
// Standard normal for element i by Box-Muller over the pair (i & ~1, i | 1).
double random_normal(uint64_t seed, uint64_t counter);

// Fills every element of a contiguous tensor; values are converted to its dtype.
void fill_randn(Tensor& t, uint64_t seed, double mean, double std);
void fill_uniform(Tensor& t, uint64_t seed, double low, double high);
// Integers uniform in [low, high); for bool tensors low=0, high=2 gives fair coins.
void fill_randint(Tensor& t, uint64_t seed, int64_t low, int64_t high);

// Derives an independent stream seed (e.g. run seed + input index) without correlation between
// them.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

}  // namespace crucible
