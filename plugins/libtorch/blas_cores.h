// The libtorch peers' declaration of their load-time BLAS core: OpenBLAS fixes its core when it
// loads, so the harness times each core this CPU can run (backend_declaration.h) and loads the
// best.
#pragma once

#include <string>
#include <vector>

#include "crucible/backend_declaration.h"

namespace crucible::libtorch {

// The -c key choosing the core, and the variable the test suite sets as its default.
inline constexpr const char* kBlasCoreOption = "blas_core";

// "env" (the environment as it is), "detect" (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset:
// OpenBLAS's own detection, offered when `env_pins_core`), then each core OpenBLAS has kernels for
// whose instructions `cpu_flags` (/proc/cpuinfo's) all include; with the probe graph.
plugin::LoadEnvChoice blas_core_choice(const std::vector<std::string>& cpu_flags,
                                       bool env_pins_core);

// blas_core_choice for this machine and this process's environment.
plugin::LoadEnvChoice blas_core_choice_here();

}  // namespace crucible::libtorch
