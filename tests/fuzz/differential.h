// Runs one graph on eager and on a backend under test (codegen fused and with fusion off, or the
// libtorch peer in its eager and jit modes) from the same inputs and reports every output that
// differs: the oracle of the differential fuzzer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"
#include "crucible/plugin_api.h"
#include "random_graph.h"

namespace crucible {
class LoadedBackend;
}

namespace crucible::fuzz {

struct Verdict {
  bool valid = true;        // false: eager rejects the graph or its inputs (not a finding)
  std::string why_invalid;  // eager's message when !valid
  std::vector<std::string> mismatches;  // one line per differing output or failed compile/run
  // Elements of integer/bool outputs decided from floats that flipped (at most 1% of an output):
  // two correct backends may round a float differently within tolerance. Counted, not failed.
  int64_t rounding_flips = 0;
  // Configurations whose outputs differed although every node, run by eager's kernel on codegen's
  // own operand values, gives codegen's result: rounding amplified downstream. Counted, not failed.
  int64_t amplified = 0;
};

// Elements of `have` (one node's result on codegen) that differ from `want` (eager's kernel on the
// same operands) by more than tol x (|want| + the op run on the operands' magnitudes), for ops
// whose every element is an accumulation (sum, mean, matmul, linear, addmm, conv2d, the average
// pools). Such a sum's rounding depends on the order of its terms and is bounded by about
// n*eps*sum|x_i| (Higham), which can dwarf the sum: +1e30 and -1e30 among small terms cancel to a
// different result in every order, and fp64 absorbs the small terms just as f32 does. -1 for other
// ops.
int64_t beyond_rounding_bound(const Node& n, const std::vector<Tensor>& operands,
                              const Tensor& have, const Tensor& want, double tol);

class Differential {
 public:
  // Loads eager and `backend` through the real plugin loader. Its configurations: codegen fused
  // and with -c fusion=off; libtorch -c mode=eager and -c mode=jit; any other, its defaults.
  explicit Differential(const std::string& backend = "codegen");
  ~Differential();

  // Every output of `g` on the backend against eager, inputs from random_inputs(g, seed). Float
  // outputs must pass the harness's accuracy rule (allclose to eager with tol = 1e-4 when f32 is
  // upstream, 1e-2 with bf16, 1e-9 with only f64; else RMSE against the fp64 reference within m x
  // eager's), NaN where eager has NaN; integers and bool exactly, but see rounding_flips.
  // `every_config` tries each configuration (codegen: also unfused), else the first only.
  // `extra` is added to every configuration (a planted -c inject=... in the oracle's own tests).
  Verdict check(const Graph& g, uint64_t seed, bool every_config, const GenOptions& opts = {},
                const std::map<std::string, std::string>& extra = {});

 private:
  // "" when every node of `g` on codegen equals eager's kernel applied to codegen's operands
  // (from Executable::intermediates); else the first node that does not, with its figures.
  std::string first_local_difference(const Graph& g, const std::vector<Tensor>& inputs,
                                     const plugin::Options& options);

  std::string name_;
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> configs_;
  std::unique_ptr<LoadedBackend> eager_, backend_;
};

}  // namespace crucible::fuzz
