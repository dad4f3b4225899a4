// The machine's ceilings as the roofline needs them, measured on the worker's OpenMP threads:
// single-precision FMA throughput and L2 bandwidth (DRAM's is contention.h's STREAM-triad canary).
#pragma once

#include <cstdint>

namespace crucible {

// FLOP/s of one pass of independent FMA chains in the widest vectors the build targets, on
// every OpenMP thread at once (`iterations` steps of 12 chains per thread).
double fma_pass_flops(long iterations);

// Peak f32 GFLOP/s: the best of `passes` passes (about 10 ms each on a 3 GHz core).
double peak_fma_gflops(int passes = 3);

// The cache level of the roofline: a kernel whose bytes per call fit in the threads' L2 caches
// together reads them at L2's bandwidth, not DRAM's, so against the STREAM triad alone it would
// show "above its roofline". l2_cache_bytes() is one core's L2 (0 when the system does not say);
// cache_triad_gbs() the STREAM triad on per-thread arrays filling half of it, every OpenMP
// thread at once, best of `passes` passes of about 2 ms, in GB/s (0 without an L2 size).
int64_t l2_cache_bytes();
double cache_triad_gbs(int passes = 3);

// The last-level cache one core shares (the L3 of its CCX or socket), from sysfs: glibc's
// sysconf can say the whole package's (256 MiB for the 32 MiB of an EPYC VM's CCX). 0 if unknown.
int64_t l3_cache_bytes();

}  // namespace crucible
