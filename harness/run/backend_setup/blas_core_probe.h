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
// blas_core, CRUCIBLE_BLAS_CORE is the default (the test suite sets env), then auto. A backend
// given as a plugin file is a peer by its file's backend name. Checks the peers' -c values first
// (check_peer_options).
std::vector<BlasChoice> choose_blas_cores(RunConfig& cfg);

// The commands that run one backend outside a suite run (run-graph, minify): `backend`'s
// environment (`settings.backend_env`'s for it, under the chosen core) as choose_blas_cores decides
// it from `settings` (config, threads, seed, plugin paths, limits); `summary` gets the line a run's
// header shows ("blas_core.libtorch: ..."), "" for a backend that is no libtorch peer (whose
// environment is --backend-env's alone).
EnvChanges choose_backend_blas_core(const std::string& backend, RunConfig settings,
                                    std::string* summary = nullptr);

// Throws Error, one line, for a libtorch peer's -c value the plugin would refuse only once a
// worker compiled with it (linear=...), so a typo is bad input (exit 2) rather than a run of
// fail_to_compile results.
void check_peer_options(const std::map<std::string, std::string>& config,
                        const std::vector<std::string>& backends);

}  // namespace crucible
