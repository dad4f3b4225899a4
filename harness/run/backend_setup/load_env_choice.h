// A backend's load-time environment, chosen before a run as its declaration asks
// (plugin::LoadEnvChoice: OpenBLAS's core, say): each candidate is probed in a worker of its own
// before any model's worker starts, and the fastest correct one becomes the backend's environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend_config.h"
#include "backend_env.h"
#include "run_config.h"

namespace crucible {

// A candidate's probe: its median time, the word the version showed after the declaration's
// version fact, or why it was discarded.
struct LoadEnvProbe {
  std::string candidate;
  double ms = 0;
  std::string shown;
  std::string discarded;  // empty: correct and timed
};

// The candidate chosen for a backend and the line that says why.
struct LoadEnvDecision {
  std::string backend;     // as the run names it
  std::string option;      // the declaration's -c key ("blas_core")
  std::string reason_var;  // the declaration's, set to summary() while the plugin loads
  std::string setting;     // auto | a candidate's name, or "--backend-env"
  std::string chosen;
  EnvChanges env;
  std::vector<LoadEnvProbe> probes;
  std::string summary() const;  // "Zen (blas_core=auto; probe ms: env[Haswell] 41.2, ...)"
  std::string header_key() const { return option + "." + backend; }  // "blas_core.libtorch"
};

// Decides the load-time environment of every backend of `cfg` that declares one (probing those
// set to auto; backends declaring the same choice share one probe) and adds it to
// cfg.backend_env under what --backend-env gave, which wins when it sets a variable a candidate
// sets. The setting is -c OPTION, else the declaration's default_from variable, else auto. Throws
// Error, one line, for a setting that names no candidate of this machine.
std::vector<LoadEnvDecision> choose_load_envs(RunConfig& cfg, const Declarations& declared);

// The commands that run one backend outside a suite run (run-graph, minify): `backend`'s
// environment (settings.backend_env's for it, under the chosen candidate), as choose_load_envs
// decides it from `settings`; `summary` gets the line a run's header shows
// ("blas_core.libtorch: ..."), "" for a backend that declares none.
EnvChanges choose_backend_load_env(const std::string& backend, RunConfig settings,
                                   const Declarations& declared, std::string* summary = nullptr);

}  // namespace crucible
