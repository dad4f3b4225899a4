// Row-major GEMM entry points shared by the eager kernels and generated code's extern calls:
// f32 through oneDNN, f64 through our own blocked kernel (the accuracy-reference path).
#pragma once

#include <cstdint>

namespace crucible {

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all row-major with leading dimensions.
// op(A)[i,p] is a[i*lda + p], or a[p*lda + i] when trans_a; likewise for B with ldb. Leading
// dimensions follow BLAS: lda >= k (m when trans_a), ldb >= n (k when trans_b), ldc >= n, each at
// least 1. beta == 0 ignores C's prior contents (NaN included); k == 0 gives beta * C.
// Safe to call concurrently and from inside OpenMP parallel regions (then runs on one thread).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, float beta = 0.0f,
              float alpha = 1.0f);
void gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a,
              int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc, double beta = 0.0,
              double alpha = 1.0);

// `batch` independent products; product i reads a + i*stride_a and b + i*stride_b and writes
// c + i*stride_c. A stride of 0 for a or b reuses one matrix for every product (broadcasting).
void gemm_batched_f32(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                      int64_t stride_b, float* c, int64_t ldc, int64_t stride_c, float beta = 0.0f,
                      float alpha = 1.0f);
void gemm_batched_f64(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                      const double* a, int64_t lda, int64_t stride_a, const double* b, int64_t ldb,
                      int64_t stride_b, double* c, int64_t ldc, int64_t stride_c, double beta = 0.0,
                      double alpha = 1.0);

}  // namespace crucible
