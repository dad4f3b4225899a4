// Which BLAS this process's libtorch calls: Debian's PyTorch takes whatever provides
// libblas.so.3, and the reference BLAS makes a GEMM 40x slower than OpenBLAS, so a peer's
// speed means nothing without it. The answer goes into the backend's version string.
#pragma once

#include <string>

namespace crucible::libtorch {

// "OpenBLAS 0.3.21 ..." (from openblas_get_config) or the file that provides sgemm_, or
// "unknown"; "reference BLAS (...)" for netlib's.
std::string active_blas();

// The core OpenBLAS chose at load (openblas_get_corename: "Haswell", "SkylakeX", ...), fixed by
// OPENBLAS_CORETYPE then; "none" without OpenBLAS.
std::string openblas_core();

}  // namespace crucible::libtorch
