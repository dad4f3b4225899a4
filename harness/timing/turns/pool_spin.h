// How long an OpenMP thread pool spins after a parallel region on this host, under this process's
// environment: what a timing worker's pool may use after its turn without being charged for it.
#pragma once

namespace crucible {

// The CPU, in ms, that the worker threads of a `threads`-thread OpenMP pool use after a region
// before they sleep (libgomp's GOMP_SPINCOUNT and OMP_WAIT_POLICY; the PAUSE latency of this CPU),
// measured once per thread count (0: OpenMP's default, as workers read it) in the harness's own
// process, where no plugin runs. A pool that has not slept after kMaxPoolSpinWallMs of wall time
// returns what it used by then.
double pool_spin_cpu_ms(int threads);

inline constexpr int kMaxPoolSpinWallMs = 500;

}  // namespace crucible
