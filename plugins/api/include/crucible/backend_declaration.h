// What a backend declares so the harness never acts on it by name (Backend::declaration()): the
// load-time environment to choose by measurement and how to bisect a failure to a pass or kernel.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace crucible::plugin {

// Variables set (a value) or unset (nullopt) while a plugin loads.
using EnvSettings = std::map<std::string, std::optional<std::string>>;

// One way of loading a library the backend opens.
struct LoadEnvCandidate {
  std::string name;  // what -c OPTION=NAME names it by: "env", "Haswell"
  EnvSettings env;   // empty: the environment as it is
  // The word the backend's version must show after LoadEnvChoice::version_fact once loaded under
  // `env` ("" unchecked): a library that falls back to another setting is then discarded rather
  // than timed as if it ran the one asked for.
  std::string expect;
};

// An environment a library of the backend reads once, when it loads (OpenBLAS's core): a worker
// cannot change it later, so the harness decides it before a run. `-c OPTION=auto` (the default)
// loads each candidate in a worker of its own, checks the probe graph against the fp64 reference,
// times it, and gives the backend the fastest correct one; `-c OPTION=NAME` takes that candidate.
struct LoadEnvChoice {
  std::string option;        // the -c key: "blas_core"
  std::string default_from;  // a variable whose value is the setting where -c gives none ("")
  std::string version_fact;  // what precedes the setting's word in the version: "BLAS core "
  // A variable set to the harness's reason (candidates and times) while the plugin loads, so the
  // backend can say in its version why it runs what it runs ("" none).
  std::string reason_var;
  std::string probe_graph;                          // crucible graph text timed for each candidate
  std::map<std::string, std::string> probe_config;  // -c options the probe compiles with
  std::vector<LoadEnvCandidate> candidates;         // those this machine can run, in order
};

// A pass the harness may turn off to learn whether a failure needs it.
struct PassSwitch {
  std::string name;        // as the culprit line names it: "fusion", "decompose(softmax)"
  std::string key, value;  // the -c option that turns it off: fusion=off
  // Tried only on a graph using one of these ops (empty: any graph).
  std::vector<std::string> ops;
  // Tried only when the failing run's options set `key` to something else: the pass is off
  // unless asked for (fast_math).
  bool only_when_set = false;
};

// How a failure on a minimized graph is bisected to what in the backend causes it.
struct Bisection {
  std::vector<PassSwitch> passes;
  // -c KEY=NODE runs value %NODE through the reference's kernel instead of the backend's own ("":
  // the backend cannot; no node is blamed).
  std::string node_fallback_key;
  // The file the backend writes into Options::debug_dir with all its generated code, each
  // function starting at a line `extern "C" void NAME(` and commenting each node it computes as
  // `// %NODE = op(...)`: the blamed node's function is the culprit kernel ("": none).
  std::string code_file;
};

struct Declaration {
  std::optional<LoadEnvChoice> load_env;
  Bisection bisection;
};

}  // namespace crucible::plugin
