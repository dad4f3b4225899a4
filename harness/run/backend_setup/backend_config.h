// Which -c options reach which backend: "key=value" every backend but eager (the reference runs
// as it is), "BACKEND:key=value" that backend alone, eager included; and whether each takes them.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "run_config.h"
#include "worker.h"

namespace crucible {

std::map<std::string, std::string> backend_config(const std::map<std::string, std::string>& config,
                                                  const std::string& backend);

// A worker job of `kind` on one backend before a run exists (the options check, the BLAS-core
// probe): `graph` in a folder of the caller's, the run's seed, threads, plugin paths, options and
// backend environment.
WorkerJob pre_run_job(const RunConfig& cfg, const std::string& kind,
                      const std::filesystem::path& graph, const std::string& backend);

// Asks each backend of `cfg` that is given -c options, before the run exists, whether it takes
// them: a sandboxed worker of its own compiles a one-node graph with them. Throws Error with the
// plugin's own message for the first that refuses (plugin::OptionError), so a mistyped key or a
// value it does not take is one line and exit 2 rather than a run of fail_to_compile. Backends in
// `load_errors` are not asked; any other failure is left to the models' own results.
void check_backend_options(const RunConfig& cfg,
                           const std::map<std::string, std::string>& load_errors);

}  // namespace crucible
