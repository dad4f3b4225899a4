// The one public header a backend plugin needs: the Backend/Executable interfaces, compile options,
// and the export macro. A plugin is a shared library; the harness checks its ABI version first.
#pragma once

#include <boost/dll/alias.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "crucible/backend_declaration.h"
#include "crucible/core/error.h"
#include "crucible/core/tensor.h"
#include "crucible/ir/graph.h"

// Bump on any change to the classes below: a plugin built against another version is refused.
#define CRUCIBLE_PLUGIN_ABI_VERSION 5

namespace crucible::plugin {

inline constexpr uint32_t kAbiVersion = CRUCIBLE_PLUGIN_ABI_VERSION;

struct BackendInfo {
  std::string name;
  std::string version;
  uint32_t abi = kAbiVersion;
};

struct Options {
  int threads = 0;                            // 0: leave OpenMP's default
  bool profile = false;                       // record per-kernel timings (no cost when off)
  std::string debug_dir;                      // where to write debug artifacts; empty: none
  std::map<std::string, std::string> config;  // backend-specific -c key=value pairs

  std::string get(const std::string& key, const std::string& fallback = "") const {
    auto it = config.find(key);
    return it == config.end() ? fallback : it->second;
  }
};

// Raised by Backend::compile when a graph cannot be compiled; the message is shown to the user.
class CompileError : public Error {
 public:
  using Error::Error;
};

// Raised by Backend::compile for a -c option the backend does not take (an unknown key, a value
// it refuses): the harness compiles a one-node graph with a run's options before the run exists,
// and refuses the run with this message, one line, instead of failing every model to compile.
// A plugin that throws a plain CompileError for these still loads; its options are then judged
// model by model.
class OptionError : public CompileError {
 public:
  using CompileError::CompileError;
};

// Raised by Executable::intermediates() of a backend that cannot return values inside its
// compiled graph (a closed library, a remote device). Callers that localize a failure (the
// minifier's per-node comparison) then fall back to running graph prefixes, which needs only run().
class IntermediatesUnsupported : public Error {
 public:
  using Error::Error;
};

// What one kernel call computes and moves, by the op registry's cost rules (op_cost): the
// harness sets each kernel's time beside its roofline with these.
struct KernelCost {
  double flops = 0;
  double bytes = 0;
};

struct KernelStat {
  std::string name;  // e.g. "eager::add" or "cpp_fused_add_mul_3"
  int64_t calls = 0;
  int64_t total_ns = 0;
  KernelCost cost;  // summed over the calls; zero when the backend does not know it
};

// The bookkeeping behind Executable::profile(): each kernel name is declared once at compile time
// and the returned index is what the run loop records against, so timing a step costs no name
// lookup.
class ProfileRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  size_t declare(const std::string& name) {
    for (size_t i = 0; i < stats_.size(); ++i) {
      if (stats_[i].name == name) return i;
    }
    stats_.push_back({name, 0, 0, {}});
    return stats_.size() - 1;
  }
  void record(size_t index, Clock::time_point start, KernelCost cost = {}) {
    add(index, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
        cost);
  }
  // A call timed elsewhere (a library's own profiler), `ns` long.
  void add(size_t index, int64_t ns, KernelCost cost = {}) {
    KernelStat& s = stats_[index];
    s.calls += 1;
    s.total_ns += ns;
    s.cost.flops += cost.flops;
    s.cost.bytes += cost.bytes;
  }
  const std::vector<KernelStat>& stats() const { return stats_; }

 private:
  std::vector<KernelStat> stats_;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the graph on its inputs (in graph input order); returns the outputs in graph output order.
  // The outputs are the caller's: the harness reads them after it destroyed the executable.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs) = 0;
  // Per-kernel timings accumulated since compile (empty unless Options::profile).
  virtual std::vector<KernelStat> profile() const { return {}; }
  // Files written into Options::debug_dir (empty unless debugging was asked for).
  virtual std::vector<std::filesystem::path> artifacts() const { return {}; }
  // Runs the graph and returns the given values (ValueIds of the graph given to compile(): inputs,
  // parameters, node results; a fusing backend still returns values it fuses away, computed by its
  // own fused code), for per-node comparison between backends. Throws Error for an id that is not
  // a value of the graph. A backend that cannot provide them keeps this default, which throws
  // IntermediatesUnsupported; it must never return values it did not compute (an empty vector or
  // a reference interpreter's values would make a comparison pass or blame the wrong node).
  virtual std::vector<Tensor> intermediates(std::span<const Tensor> inputs,
                                            std::span<const ValueId> values) {
    (void)inputs;
    (void)values;
    throw IntermediatesUnsupported("this backend does not return intermediate values");
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo info() const = 0;
  virtual std::unique_ptr<Executable> compile(const Graph& graph, const Options& options) = 0;
  // Whether this machine can run the backend at all, asked once before a run in a worker: "" when
  // it can, else one line saying what is missing (a compiler the backend runs, a library it
  // opens). The harness then refuses the run with that line instead of failing every model the
  // same way. The backend declares its needs here; the harness knows none of them.
  virtual std::string unavailable_here() const { return ""; }
  // What the harness must do differently for this backend (backend_declaration.h), asked in the
  // same worker as unavailable_here: a load-time environment to choose by measurement, how to
  // bisect a failure to a pass and a kernel. The default declares nothing.
  virtual Declaration declaration() const { return {}; }
};

// Every backend's run() starts with check_inputs, and intermediates() with check_value_ids
// (crucible/ir/graph.h), so a caller's mistake reads the same whichever backend it reached.
using ::crucible::check_inputs;
using ::crucible::check_value_ids;

using AbiVersionFn = uint32_t();
using FactoryFn = std::unique_ptr<Backend>();

inline uint32_t abi_version() { return kAbiVersion; }

}  // namespace crucible::plugin

// Exports `factory` (a function returning std::unique_ptr<crucible::plugin::Backend>) together with
// this header's ABI version, under the two symbol names the harness looks up:
//   crucible_plugin_abi      -> AbiVersionFn*   (this header's CRUCIBLE_PLUGIN_ABI_VERSION)
//   crucible_create_backend  -> FactoryFn*
// Both are Boost.DLL aliases: exported *variables* holding a pointer to the function, not the
// functions themselves. A host reads them with boost::dll::shared_library::get_alias<Fn>(name), or
// with dlsym(handle, name) and one dereference: (*reinterpret_cast<AbiVersionFn**>(sym))(). It
// must call crucible_plugin_abi and compare with its own kAbiVersion before calling the factory,
// since the classes above change layout between versions. crucible::load_plugin()
// (crucible/plugin_loader.h, the crucible::loader target) does all of this and validates the file.
#define CRUCIBLE_EXPORT_BACKEND(factory)                              \
  BOOST_DLL_ALIAS(crucible::plugin::abi_version, crucible_plugin_abi) \
  BOOST_DLL_ALIAS(factory, crucible_create_backend)
