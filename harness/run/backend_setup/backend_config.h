// Which -c options reach which backend: "key=value" every backend but eager (the reference runs
// as it is), "BACKEND:key=value" that backend alone, eager included; whether each can run here
// and takes them, and what each declares.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "crucible/backend_declaration.h"
#include "run_config.h"
#include "worker.h"

namespace crucible {

// The name a backend's -c scope, declaration and messages go by: a plugin file's backend name
// (crucible_backend_NAME.so is NAME), else the backend as given.
std::string backend_name(const std::string& backend);

std::map<std::string, std::string> backend_config(const std::map<std::string, std::string>& config,
                                                  const std::string& backend);

// A worker job of `kind` on one backend before a run exists (the options check, the BLAS-core
// probe): `graph` in a folder of the caller's, the run's seed, threads, plugin paths, options and
// backend environment.
WorkerJob pre_run_job(const RunConfig& cfg, const std::string& kind,
                      const std::filesystem::path& graph, const std::string& backend);

// What each backend declared (Backend::declaration), by the name the run gives it.
using Declarations = std::map<std::string, plugin::Declaration>;

// Asks each backend of `cfg`, before the run exists, in a sandboxed worker of its own: whether it
// can run on this machine (Backend::unavailable_here: codegen's compiler, say), what it declares,
// and, when it is given -c options, whether it takes them (it compiles a one-node graph with
// them). Throws Error with the plugin's own line for the first that cannot run or refuses
// (plugin::OptionError), so a node without a compiler or a mistyped key is one line and exit 2
// rather than a run of failures. Backends in `load_errors` are not asked (nor is one whose worker
// failed otherwise: it declares nothing); any other failure is left to the models' own results.
Declarations ask_backends(const RunConfig& cfg,
                          const std::map<std::string, std::string>& load_errors = {});

}  // namespace crucible
