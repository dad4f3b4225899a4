// Peak FMA throughput: 12 independent FMA chains per thread hide the FMA latency, in AVX-512
// where the build targets it (oneDNN's kernels use it there, and a 256-bit peak is half of it);
// cache bandwidths: the STREAM triad on arrays that stay in each thread's L1, L2 or share of L3.
#include "machine_peaks.h"

#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "stream_triad.h"

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
  float sink = 0;
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
  __asm__ __volatile__("" : : "g"(sink) : "memory");  // the chains' result is used: none elided
  return 2.0 * kFmaLanes * kChains * static_cast<double>(iterations) * threads / secs;
}

double peak_fma_gflops(int passes) {
  double best = 0;
  for (int p = 0; p < passes; ++p) best = std::max(best, fma_pass_flops(long{1} << 19));
  return best / 1e9;
}

int64_t l2_cache_bytes() {
  const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? l2 : 0;
}

namespace {

// The L3 one core shares as the kernel's cache topology says it; 0 where a VM hides it.
int64_t topology_l3_bytes() {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level(dir + "/level"), size(dir + "/size");
    int lv = 0;
    int64_t kib = 0;
    std::string unit;
    if (!(level >> lv)) break;
    if (lv == 3 && (size >> kib >> unit) && kib > 0) {
      if (unit == "M") return kib << 20;
      return kib << 10;  // sysfs says "32768K"
    }
  }
  return 0;
}

}  // namespace

int64_t l3_cache_bytes() {
  if (const int64_t l3 = topology_l3_bytes(); l3 > 0) return l3;
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? l3 : 0;
}

namespace {

// The triad on per-thread arrays of `bytes_per_thread` (three arrays together), every OpenMP
// thread at once, best of `passes` passes of about 1-2 ms, in GB/s over all threads.
double triad_gbs_per_thread(int64_t bytes_per_thread, int passes) {
  const int64_t n = bytes_per_thread / 3 / static_cast<int64_t>(sizeof(double));
  if (n <= 0) return 0;
  // Each thread's arrays stay in the level for every repeat after the first.
  const int reps = static_cast<int>(std::max<int64_t>(1, (int64_t{1} << 22) / n));
  double best_s = std::numeric_limits<double>::infinity();
  int threads = 1;
  for (int p = 0; p < passes; ++p) {
    double secs = 0;
#pragma omp parallel
    {
      std::vector<double> a(n), b(n, 1.0), c(n, 2.0);
      stream_triad_rows(a.data(), b.data(), c.data(), 3.0, n);  // warm
#pragma omp barrier
#pragma omp single
      {
        threads = omp_get_num_threads();
        secs = -omp_get_wtime();
      }
      for (int r = 0; r < reps; ++r) {
        stream_triad_rows(a.data(), b.data(), c.data(), 3.0, n);
        b[static_cast<size_t>(r) % n] += a[0];  // a loop-carried use, so no repeat is elided
      }
#pragma omp barrier
#pragma omp single
      secs += omp_get_wtime();
    }
    best_s = std::min(best_s, secs);
  }
  return stream_triad_bytes<double>(n) * reps * threads / best_s / 1e9;
}

}  // namespace

int64_t l1_cache_bytes() {
  const long l1 = ::sysconf(_SC_LEVEL1_DCACHE_SIZE);
  return l1 > 0 ? l1 : 0;
}

CacheCeilings cache_ceilings(int passes) {
  const auto threads = static_cast<double>(omp_get_max_threads());
  CacheCeilings c;
  // Arrays fill half of what each thread has of a level, so the lines the loop and stack touch
  // and the level's associativity do not push them out.
  auto level = [&](int64_t per_thread, double together) {
    if (per_thread <= 0) return reports::CacheCeiling{};
    return reports::CacheCeiling{triad_gbs_per_thread(per_thread / 2, passes), together};
  };
  c.l1 = level(l1_cache_bytes(), static_cast<double>(l1_cache_bytes()) * threads);
  c.l2 = level(l2_cache_bytes(), static_cast<double>(l2_cache_bytes()) * threads);
  // The L3 is shared: the threads split it (taken as one L3, as a bound pinned to one CCX has).
  if (const int64_t l3 = topology_l3_bytes(); l3 > 0) {
    c.l3 = level(static_cast<int64_t>(static_cast<double>(l3) / threads), static_cast<double>(l3));
  } else if (const int64_t l2 = l2_cache_bytes(); l2 > 0 && l3_cache_bytes() >= 8 * l2) {
    // Where a VM hides the topology, CPUID's L3 is the whole package's (508 MiB on a Zen 5 VM
    // whose CCX has 32): the level is what the triad measures fast, arrays of 4 L2s a thread.
    const int64_t per_thread = 4 * l2;
    c.l3 = {triad_gbs_per_thread(per_thread, passes), static_cast<double>(per_thread) * threads};
  }
  return c;
}

CacheCeilings best_of(const CacheCeilings& a, const CacheCeilings& b) {
  auto best = [](const reports::CacheCeiling& x, const reports::CacheCeiling& y) {
    return reports::CacheCeiling{std::max(x.gbs, y.gbs), std::max(x.bytes, y.bytes)};
  };
  return {best(a.l1, b.l1), best(a.l2, b.l2), best(a.l3, b.l3)};
}

}  // namespace crucible
