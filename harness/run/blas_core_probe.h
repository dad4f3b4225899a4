// The libtorch peers' BLAS core, chosen by measurement (-c BACKEND:blas_core=auto, the default):
// OpenBLAS fixes its core when it loads, so the run tries each candidate in a probe worker of its
// own before any model's worker starts, and the fastest correct one becomes the peers' environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend_env.h"
#include "run_config.h"

namespace crucible {

// One way of loading OpenBLAS: "env" (the environment as it is), "detect" (OPENBLAS_CORETYPE and
// OPENBLAS_L2_SIZE unset: OpenBLAS's own detection) or a named core.
struct BlasCandidate {
  std::string name;
  EnvChanges env;
};

// env, detect (when the environment pins anything), then each core OpenBLAS has kernels for whose
// instructions `cpu_flags` (/proc/cpuinfo's) all include.
std::vector<BlasCandidate> blas_candidates(const std::vector<std::string>& cpu_flags);

// A candidate's probe: its median time, the core OpenBLAS says it ran, or why it was discarded.
struct BlasProbe {
  std::string candidate;
  double ms = 0;
  std::string core;
  std::string discarded;  // empty: correct and timed
};

// The candidate chosen for a set of libtorch peers and the line that says why.
struct BlasChoice {
  std::vector<std::string> backends;
  std::string setting;  // auto | env | detect | NAME, or "--backend-env"
  std::string chosen;
  EnvChanges env;
  std::vector<BlasProbe> probes;
  std::string summary() const;
};

// Decides the BLAS core of every libtorch peer in `cfg` (probing when one asks for auto) and adds
// the chosen variables to cfg.backend_env under what --backend-env gave. Where -c says no
// blas_core, CRUCIBLE_BLAS_CORE is the default (the test suite sets env), then auto.
std::vector<BlasChoice> choose_blas_cores(RunConfig& cfg);

}  // namespace crucible
