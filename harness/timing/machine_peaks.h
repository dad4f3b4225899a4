// The machine's compute ceiling as the roofline needs it: single-precision FMA throughput on the
// worker's OpenMP threads, measured (the memory ceiling is contention.h's STREAM-triad canary).
#pragma once

namespace crucible {

// FLOP/s of one pass of independent FMA chains in the widest vectors the build targets, on
// every OpenMP thread at once (`iterations` steps of 12 chains per thread).
double fma_pass_flops(long iterations);

// Peak f32 GFLOP/s: the best of `passes` passes (about 10 ms each on a 3 GHz core).
double peak_fma_gflops(int passes = 3);

}  // namespace crucible
