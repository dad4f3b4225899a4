// Repro directories: the minimized graph with its exact input and parameter data (the recipes kept
// beside it), the backend and options, the locked signature and a manifest of every file's size
// and hash, so `crucible repro DIR` reruns it anywhere and a tampered repro is refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend_env.h"
#include "candidate.h"
#include "signature.h"

namespace crucible::minify {

struct ReproInfo {
  std::string backend;
  std::map<std::string, std::string> config;
  // The backend's environment in the failing run (a libtorch peer's BLAS core), set again while
  // `crucible repro` loads it.
  EnvChanges backend_env;
  double tolerance = 1e-4;
  bool cosine = false;
  bool scaled_tolerance = false;
  int threads = 0;
  Signature signature;
  std::string original;  // where the failing graph came from
  int nodes_before = 0, nodes_after = 0;
  int replays = 0, replays_ok = 0;
  std::string culprit;      // codegen's kernel and pass bisection, one line ("" when not run)
  std::string kernel_code;  // the culprit kernel's generated code, written as culprit_kernel.cpp
  std::string code_hash;    // codegen: hash of the minimized graph's generated code
  uint64_t seed = 0;        // the run seed the original inputs and parameters were drawn with
  std::string backend_version;  // what the backend's plugin said of itself in the failing run
  // The plugin file that ran (absolute): `crucible repro` looks there first, so an out-of-tree
  // backend is found again without --plugin-path ("" when unknown).
  std::string plugin_file;
};

// The plugin directories `crucible repro` adds to the usual search path: those given (they win),
// then the recorded plugin file's directory.
std::vector<std::string> repro_plugin_paths(const ReproInfo& info,
                                            const std::vector<std::string>& given);

// Throws Error unless `dir` may receive a repro: absent, empty, or an earlier repro (it has a
// manifest). Anything else is the user's, and write_repro replaces the files it finds.
void check_repro_dir(const std::filesystem::path& dir);

// `c` with every parameter bound to the tensor its recipe (or file) gives: what a repro runs, so a
// later change to a recipe's generator cannot change the repro.
Candidate bind_params(const Candidate& c);

// Writes `c` and `info` into `dir` (created; an earlier repro's files are replaced): graph.graph
// with every input and parameter as data, and graph_recipes.graph, the same graph with the
// parameters' recipes, for reading. The directory stands alone.
void write_repro(const std::filesystem::path& dir, const Candidate& c, const ReproInfo& info);

struct LoadedRepro {
  Candidate candidate;
  ReproInfo info;
};
// Reads a repro back, checking the manifest's format and ABI versions and every file's size and
// hash; throws Error naming the first thing that does not match.
LoadedRepro load_repro(const std::filesystem::path& dir);

}  // namespace crucible::minify
