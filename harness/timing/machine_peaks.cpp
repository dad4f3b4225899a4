// Peak FMA throughput: 12 independent FMA chains per thread hide the FMA latency, in AVX-512
// where the build targets it (oneDNN's kernels use it there, and a 256-bit peak is half of it).
#include "machine_peaks.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>

namespace crucible {

namespace {

#ifdef __AVX512F__
using FmaVec = __m512;
constexpr int kFmaLanes = 16;
inline FmaVec fma_set1(float v) { return _mm512_set1_ps(v); }
inline FmaVec fma(FmaVec a, FmaVec b, FmaVec c) { return _mm512_fmadd_ps(a, b, c); }
inline FmaVec fma_add(FmaVec a, FmaVec b) { return _mm512_add_ps(a, b); }
inline void fma_store(float* p, FmaVec v) { _mm512_storeu_ps(p, v); }
#else
using FmaVec = __m256;
constexpr int kFmaLanes = 8;
inline FmaVec fma_set1(float v) { return _mm256_set1_ps(v); }
inline FmaVec fma(FmaVec a, FmaVec b, FmaVec c) { return _mm256_fmadd_ps(a, b, c); }
inline FmaVec fma_add(FmaVec a, FmaVec b) { return _mm256_add_ps(a, b); }
inline void fma_store(float* p, FmaVec v) { _mm256_storeu_ps(p, v); }
#endif

constexpr int kChains = 12;

}  // namespace

double fma_pass_flops(long iterations) {
  volatile float sink = 0;
  int threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    FmaVec acc[kChains];
    for (int k = 0; k < kChains; ++k) acc[k] = fma_set1(0.001f * static_cast<float>(k));
    const FmaVec x = fma_set1(0.999999f), y = fma_set1(1e-7f);
    for (long i = 0; i < iterations; ++i) {
      for (int k = 0; k < kChains; ++k) acc[k] = fma(acc[k], x, y);
    }
    FmaVec t = acc[0];
    for (int k = 1; k < kChains; ++k) t = fma_add(t, acc[k]);
    float lanes[kFmaLanes];
    fma_store(lanes, t);
    float sum = 0;
    for (float l : lanes) sum += l;
#pragma omp atomic
    sink += sum;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * kFmaLanes * kChains * static_cast<double>(iterations) * threads / secs;
}

double peak_fma_gflops(int passes) {
  double best = 0;
  for (int p = 0; p < passes; ++p) best = std::max(best, fma_pass_flops(long{1} << 19));
  return best / 1e9;
}

}  // namespace crucible
