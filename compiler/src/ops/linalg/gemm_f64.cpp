// f64 GEMM: our own cache-blocked, packed, OpenMP-parallel kernel (oneDNN has no f64 matmul). It is
// the accuracy-reference path, so its summation order is fixed (FMA, thread-count independent).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "crucible/core/error.h"
#include "crucible/ops/gemm.h"

namespace crucible {
namespace {

// Blocking after the usual scheme: a kMR x kNR register tile (6 x 8 doubles = 12 AVX2
// accumulators), A blocks of kMC x kKC packed for L2, B panels of kKC x kNC packed for L3.
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 8;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 120;  // a multiple of kMR
constexpr int64_t kNC = 2048;
// Below this many multiply-adds one thread is faster than waking the others.
constexpr int64_t kParallelMacs = 1 << 16;

// Copies op(A)[0:mc, 0:kc] (element (i, p) at a[i*rs + p*cs]) into kMR-row panels, each stored
// k-major so that the micro-kernel reads kMR consecutive values per step; pads rows with zeros.
void pack_a(const double* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, double* dst) {
#pragma omp for schedule(static)
  for (int64_t ip = 0; ip < mc; ip += kMR) {
    const int64_t mr = std::min(kMR, mc - ip);
    double* panel = dst + ip * kc;
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < kMR; ++i)
        panel[p * kMR + i] = i < mr ? a[(ip + i) * rs + p * cs] : 0.0;
    }
  }
}

// Copies op(B)[0:kc, 0:nc] (element (p, j) at b[p*rs + j*cs]) into kNR-column panels, k-major.
void pack_b(const double* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, double* dst) {
#pragma omp for schedule(static)
  for (int64_t jp = 0; jp < nc; jp += kNR) {
    const int64_t nr = std::min(kNR, nc - jp);
    double* panel = dst + jp * kc;
    for (int64_t p = 0; p < kc; ++p) {
      if (nr == kNR && cs == 1) {
        for (int64_t j = 0; j < kNR; ++j) panel[p * kNR + j] = b[p * rs + jp + j];
      } else {
        for (int64_t j = 0; j < kNR; ++j)
          panel[p * kNR + j] = j < nr ? b[p * rs + (jp + j) * cs] : 0.0;
      }
    }
  }
}

// Four doubles in one AVX2 register, through GCC/Clang vector extensions (portable, no intrinsics).
typedef double v4d __attribute__((vector_size(32)));
inline v4d load4(const double* p) {
  v4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// C[0:mr, 0:nr] = alpha * (Apanel . Bpanel) + beta * C (beta == 0: C is not read). The 6 x 8 tile
// keeps 12 accumulators in registers and needs 2 loads of B and 6 broadcasts of A per 12 FMAs,
// which the load ports sustain (a 4 x 8 tile with B reloaded per row was load-bound at half speed).
inline void micro_kernel(int64_t kc, const double* ap, const double* bp, double* c, int64_t ldc,
                         int64_t mr, int64_t nr, double alpha, double beta) {
  v4d acc[kMR][2] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const v4d b0 = load4(bp + p * kNR), b1 = load4(bp + p * kNR + 4);
    const double* av = ap + p * kMR;
#pragma GCC unroll 8
    for (int64_t i = 0; i < kMR; ++i) {
      acc[i][0] += av[i] * b0;  // contracted to FMA (GCC's default for C++)
      acc[i][1] += av[i] * b1;
    }
  }
  double tile[kMR][kNR];
  std::memcpy(tile, acc, sizeof tile);
  for (int64_t i = 0; i < mr; ++i) {
    double* row = c + i * ldc;
    if (beta == 0.0) {
      for (int64_t j = 0; j < nr; ++j) row[j] = alpha * tile[i][j];
    } else {
      for (int64_t j = 0; j < nr; ++j) row[j] = alpha * tile[i][j] + beta * row[j];
    }
  }
}

void gemm_f64_impl(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                   int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc, double beta,
                   double alpha, bool parallel) {
  const int64_t rs_a = trans_a ? 1 : lda, cs_a = trans_a ? lda : 1;
  const int64_t rs_b = trans_b ? 1 : ldb, cs_b = trans_b ? ldb : 1;
  const int64_t mc_max = std::min(kMC, (m + kMR - 1) / kMR * kMR);
  const int64_t nc_max = std::min(kNC, (n + kNR - 1) / kNR * kNR);
  const int64_t kc_max = std::min(kKC, k);
  // Packing buffers of the calling thread, shared by the team it starts (reused across calls).
  thread_local std::vector<double> a_buf, b_buf;
  if (a_buf.size() < static_cast<size_t>(mc_max * kc_max)) a_buf.resize(mc_max * kc_max);
  if (b_buf.size() < static_cast<size_t>(nc_max * kc_max)) b_buf.resize(nc_max * kc_max);
  double* ap = a_buf.data();
  double* bp = b_buf.data();

#pragma omp parallel if (parallel)
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      // Later depth panels accumulate onto the first one's result.
      const double beta_pc = pc == 0 ? beta : 1.0;
      pack_b(b + pc * rs_b + jc * cs_b, rs_b, cs_b, kc, nc, bp);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(a + ic * rs_a + pc * cs_a, rs_a, cs_a, mc, kc, ap);
        const int64_t tiles_m = (mc + kMR - 1) / kMR, tiles_n = (nc + kNR - 1) / kNR;
        // Each tile is written by one thread and its value does not depend on which one.
#pragma omp for collapse(2) schedule(static)
        for (int64_t jr = 0; jr < tiles_n; ++jr) {
          for (int64_t ir = 0; ir < tiles_m; ++ir) {
            const int64_t i0 = ir * kMR, j0 = jr * kNR;
            micro_kernel(kc, ap + i0 * kc, bp + j0 * kc, c + (ic + i0) * ldc + jc + j0, ldc,
                         std::min(kMR, mc - i0), std::min(kNR, nc - j0), alpha, beta_pc);
          }
        }
      }
    }
  }
}

void check_ld(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
              int64_t lda, int64_t ldb, int64_t ldc, int64_t stride_c) {
  // With k == 0 neither operand is read: an empty operand's leading dimension may be anything
  // (a [3,0] tensor's row stride is 0).
  const bool operands_ok = k == 0 || (lda >= std::max<int64_t>(1, trans_a ? m : k) &&
                                      ldb >= std::max<int64_t>(1, trans_b ? k : n));
  if (!operands_ok || ldc < std::max<int64_t>(1, n) || (batch > 1 && stride_c == 0)) {
    throw Error(
        fmt::format("gemm_f64: invalid leading dimensions lda={} ldb={} ldc={} for m={} n={} k={}",
                    lda, ldb, ldc, m, n, k));
  }
}

void scale_c(int64_t m, int64_t n, double* c, int64_t ldc, double beta) {
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) c[r * ldc + j] = beta == 0.0 ? 0.0 : beta * c[r * ldc + j];
  }
}

}  // namespace

void gemm_batched_f64(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      const double* a, int64_t lda, int64_t stride_a, const double* b, int64_t ldb,
                      int64_t stride_b, double* c, int64_t ldc, int64_t stride_c, double beta,
                      double alpha) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  check_ld(trans_a, trans_b, batch, m, n, k, lda, ldb, ldc, stride_c);
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i) scale_c(m, n, c + i * stride_c, ldc, beta);
    return;
  }
  const int64_t macs = m * n * k;
  const bool big = macs >= kParallelMacs;
  // Many small products: one per thread. Few or large ones: every thread on each product.
  if (batch > 1 && !big && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) {
      gemm_f64_impl(trans_a, trans_b, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb,
                    c + i * stride_c, ldc, beta, alpha, false);
    }
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    gemm_f64_impl(trans_a, trans_b, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb,
                  c + i * stride_c, ldc, beta, alpha, big);
  }
}

void gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc, double beta,
              double alpha) {
  gemm_batched_f64(trans_a, trans_b, 1, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, beta, alpha);
}

}  // namespace crucible
