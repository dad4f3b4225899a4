// The machine's ceilings as the roofline needs them, measured on the worker's OpenMP threads:
// single-precision FMA throughput and the cache levels' bandwidth (DRAM's is contention.h's
// canary).
#pragma once

#include <cstdint>

#include "crucible/reports/records.h"

namespace crucible {

// FLOP/s of one pass of independent FMA chains in the widest vectors the build targets, on
// every OpenMP thread at once (`iterations` steps of 12 chains per thread).
double fma_pass_flops(long iterations);

// Peak f32 GFLOP/s: the best of `passes` passes (about 10 ms each on a 3 GHz core).
double peak_fma_gflops(int passes = 3);

// The cache levels of the roofline: bytes per call that fit a level's caches together stream at
// its bandwidth, not DRAM's, so against the STREAM triad alone they would show "above the
// roofline". l1/l2_cache_bytes() are one core's (0 when the system does not say).
int64_t l1_cache_bytes();
int64_t l2_cache_bytes();

// Each level's triad on per-thread arrays filling half of the thread's share of it (L1 and L2
// their own, L3 split between the threads), every OpenMP thread at once, best of `passes`; with
// the bytes the level holds for those threads together. A level the system does not size is 0.
struct CacheCeilings {
  reports::CacheCeiling l1, l2, l3;
};
CacheCeilings cache_ceilings(int passes = 3);
// Each level's better bandwidth (a level measured on a busy machine reads low).
CacheCeilings best_of(const CacheCeilings& a, const CacheCeilings& b);

// The last-level cache one core shares (the L3 of its CCX or socket), from sysfs: glibc's
// sysconf can say the whole package's (256 MiB for the 32 MiB of an EPYC VM's CCX). 0 if unknown.
int64_t l3_cache_bytes();

}  // namespace crucible
