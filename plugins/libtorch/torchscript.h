// -c mode=jit: the graph as a TorchScript module (parameters as attributes, one forward method
// written as TorchScript source), frozen and passed through optimize_for_inference, the path
// PyTorch 1.13 offers for CPU inference (conv-bn folding, prepacked oneDNN weights, fusion).
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "aten_ops.h"
#include "crucible/ir/graph.h"

namespace crucible::libtorch {

class ScriptedGraph {
 public:
  virtual ~ScriptedGraph() = default;
  // The graph's outputs for `inputs` (graph input order).
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) = 0;
  // The TorchScript source compiled, and the optimized graph it became (for debug artifacts).
  virtual const std::string& source() const = 0;
  virtual std::string optimized_graph() const = 0;
};

// Builds, freezes and optimizes; throws plugin::CompileError when TorchScript rejects the graph.
// With a `debug_dir`, writes torchscript.py there first (so a rejected source can be read) and
// torchscript_optimized.txt after.
std::unique_ptr<ScriptedGraph> script_graph(const Graph& g, const std::vector<at::Tensor>& params,
                                            bool optimize_for_inference, const ScriptStyle& style,
                                            const std::filesystem::path& debug_dir = {});

}  // namespace crucible::libtorch
