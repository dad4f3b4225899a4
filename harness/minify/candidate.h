// A candidate of a minification: a graph with its exact input tensors. Candidates are cut from the
// original graph by keeping a subset of its nodes; a kept node's operand whose producer was cut
// becomes an input fed with the value eager computed for it on the original inputs.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crucible/ir/graph.h"

namespace crucible::minify {

struct Candidate {
  Graph graph;
  std::vector<Tensor> inputs;  // one per graph input, in order

  // Compute nodes (every node that is not a pure view or data move counts).
  int compute_nodes() const;
  // Writes `dir`/graph.graph with every input as file(path="input.<name>.bin") data, bound
  // parameters as graph.<name>.bin beside it; recipes of parameters stay recipes (file-backed ones
  // pointing at their side file by absolute path).
  void write(const std::filesystem::path& dir) const;
  // A hash of the graph's text and every input's bytes: equal candidates, equal keys.
  std::string key() const;
};

// The file a candidate's input `name` is written to, beside graph.graph.
std::string input_file_name(const std::string& name);

// What eager computed for every value of the original graph on its inputs (inputs, parameters and
// node results, by ValueId).
using Recording = std::vector<Tensor>;
Recording record_values(const Graph& g, const std::vector<Tensor>& inputs);

// The original graph with its inputs, as a candidate.
Candidate whole(const Graph& g, const std::vector<Tensor>& inputs);

// Parameter recipes replaced while reducing (zeros() for a weight the failure does not need).
using ParamOverrides = std::map<ValueId, Initializer>;

// The candidate keeping nodes `keep` (by node index, ascending) of `g`; its outputs are the kept
// nodes' values that `g` returns or that no kept node reads. Parameters a kept node reads stay
// parameters, with their recipe (or its override) or their data. Throws GraphError for a cut the
// IR rejects.
Candidate cut(const Graph& g, const Recording& rec, const std::vector<int>& keep,
              const ParamOverrides& overrides = {});

// `c` with its inputs replaced by `inputs` (other shapes or dtypes) and every node's type inferred
// again; nullopt when the graph's ops do not accept them (a parameter operand's shape, a reshape
// target, a dtype an op refuses).
std::optional<Candidate> with_inputs(const Candidate& c, std::vector<Tensor> inputs);

// The nodes of `g` that some output of `g` depends on, ascending.
std::vector<int> live_nodes(const Graph& g, const std::vector<int>& keep);

}  // namespace crucible::minify
