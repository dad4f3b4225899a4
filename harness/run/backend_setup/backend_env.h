// Per-backend environment (`crucible run --backend-env BACKEND:KEY=VALUE`, `BACKEND:-KEY`): the
// variables a worker sets, or unsets, just while it loads that backend's plugin.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace crucible {

// KEY -> VALUE to set, or nullopt to unset.
using EnvChanges = std::map<std::string, std::optional<std::string>>;
// BACKEND -> its changes.
using BackendEnv = std::map<std::string, EnvChanges>;

// Parses "BACKEND:KEY=VALUE" / "BACKEND:-KEY" specs (a later one for the same key wins); throws
// Error "--backend-env 'SPEC': ..." on bad syntax.
BackendEnv parse_backend_env(const std::vector<std::string>& specs);

// The specs that parse back into `env` (the worker's argv).
std::vector<std::string> backend_env_specs(const BackendEnv& env);

// "KEY=VALUE -KEY2" for the run header and the store.
std::string describe_env(const EnvChanges& changes);

// `base` with `over`'s keys replacing its own (an explicit --backend-env over a chosen one).
EnvChanges overlay(EnvChanges base, const EnvChanges& over);

// Applies `changes` to this process's environment and restores what was there when destroyed.
class ScopedEnv {
 public:
  explicit ScopedEnv(const EnvChanges& changes);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  EnvChanges saved_;
};

}  // namespace crucible
