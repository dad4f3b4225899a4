// The one way crucible sets OpenMP's thread count for a run: held to what a parallel region can
// really get, since oneDNN plans its work for omp_get_max_threads() threads.
#pragma once

namespace crucible {

// Sets this thread's OpenMP count for later regions to `requested` (at least 1), held to
// OMP_THREAD_LIMIT, and turns dynamic adjustment (OMP_DYNAMIC) off. oneDNN 2.6 splits a primitive
// into omp_get_max_threads() parts and computes only the parts of the threads that came: a region
// given fewer threads than that left outputs unwritten (PackedLinear under OMP_THREAD_LIMIT=1 with
// 2 threads requested). It also turns parallel regions back on where no level was active
// (OMP_MAX_ACTIVE_LEVELS=0), which gave the same one-thread regions. Returns the count set.
int use_openmp_threads(int requested);

}  // namespace crucible
