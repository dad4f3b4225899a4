// STREAM's triad a = b + s*c: the one loop every bandwidth ceiling crucible states is measured
// with (the timing worker's DRAM canary, the threads' L2 triad, the benchmarks' bounds).
#pragma once

#include <cstdint>

namespace crucible {

// Over [0, n) on the calling thread, vectorized: for a loop inside a parallel region.
template <typename T>
inline void stream_triad_rows(T* a, const T* b, const T* c, T s, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// Over [0, n) shared by the OpenMP team in static blocks, as STREAM runs it.
template <typename T>
inline void stream_triad(T* a, const T* b, const T* c, T s, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// The bytes a triad over n elements moves, counted as STREAM counts them: three arrays, no
// write-allocate traffic.
template <typename T>
constexpr double stream_triad_bytes(int64_t n) {
  return 3.0 * static_cast<double>(n) * sizeof(T);
}

}  // namespace crucible
