// What the libtorch peer runs on, for the version string stored with each of its results: ATen's
// CPU dispatch level, oneDNN and which op classes reach it, the BLAS and its core, threads, the
// allocator, and why that BLAS core (the run's choice, see
// harness/run/backend_setup/blas_core_probe.h).
#pragma once

#include <string>

namespace crucible::libtorch {

// "ATen AVX2; oneDNN 2.6.3 (conv2d yes, linear no, matmul no); BLAS OpenBLAS 0.3.21 ... (file);
// BLAS core SkylakeX; threads intra 2, inter 2; allocator jemalloc; blas_core SkylakeX (...)".
std::string peer_facts();

}  // namespace crucible::libtorch
